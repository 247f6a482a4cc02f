//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package postgres

// peekNothing cannot peek here: every idle connection is pinged, as
// pgxpool does by default.
func peekNothing(uintptr) bool { return false }
