//go:build !unix

package peer

// epochOpenFlags: nothing to add where there are no FIFOs to block on.
const epochOpenFlags = 0

func isLink(error) bool { return false }

// checkStateDir checks nothing where Unix permissions do not apply.
func checkStateDir(string) error { return nil }
