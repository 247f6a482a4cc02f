//go:build unix

package peer

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// epochOpenFlags make opening the epoch file fail on a symbolic link
// (ELOOP) and return at once on a FIFO or device instead of blocking.
const epochOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// isLink reports whether err is opening a symbolic link with O_NOFOLLOW.
func isLink(err error) bool { return errors.Is(err, syscall.ELOOP) }

// checkStateDir refuses a state directory that anyone but this user may
// write: whoever can write it can delete or rewrite the epoch file, and a
// member whose epoch went back issues fencing terms below ones already
// issued.
func checkStateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("peer: the state directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	euid := os.Geteuid()
	switch {
	case int(st.Uid) != euid:
		return invalidf("state directory %s is owned by uid %d, not by this user (uid %d), who could rewrite the epoch file; use a directory of your own", dir, st.Uid, euid)
	case st.Mode&0o022 != 0:
		return invalidf("state directory %s is writable by group or others (mode %04o), who could rewrite the epoch file; run chmod go-w %s", dir, st.Mode&0o7777, dir)
	}
	return nil
}
