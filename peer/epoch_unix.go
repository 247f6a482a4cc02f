//go:build unix

package peer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/tenurehq/tenure/internal/dirsafe"
)

// epochOpenFlags make opening the epoch file fail on a symbolic link
// (ELOOP) and return at once on a FIFO or device instead of blocking.
const epochOpenFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// isLink reports whether err is opening a symbolic link with O_NOFOLLOW.
func isLink(err error) bool { return errors.Is(err, syscall.ELOOP) }

// checkStateDir refuses a state directory that anyone but this user may
// write, or move aside: whoever can write it can delete or rewrite the
// epoch file, and whoever can rename entries of a directory above it can
// put an empty one in its place; either way the member's epoch goes back
// and it issues fencing terms below ones already issued. Every directory
// above must pass [dirsafe.CheckParent].
func checkStateDir(dir string) error {
	st, err := statOf(dir)
	if err != nil {
		return fmt.Errorf("peer: the state directory: %w", err)
	}
	euid := os.Geteuid()
	switch {
	case int(st.Uid) != euid:
		return invalidf("state directory %s is owned by uid %d, not by this user (uid %d), who could rewrite the member's saved epoch or raft term; use a directory of your own", dir, st.Uid, euid)
	case st.Mode&0o022 != 0:
		return invalidf("state directory %s is writable by group or others (mode %04o), who could rewrite the member's saved epoch or raft term; run chmod go-w %s", dir, st.Mode&0o7777, dir)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("peer: the state directory: %w", err)
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		st, err := statOf(p)
		if err != nil {
			return fmt.Errorf("peer: the state directory: %w", err)
		}
		o := dirsafe.Owner{UID: st.Uid, GID: st.Gid, Mode: uint32(st.Mode)}
		if err := dirsafe.CheckParent(p, o, uint32(euid), false); err != nil {
			return invalidf("%s, above state directory %s, %v", p, dir, err)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// statOf returns the Unix status of path, following links.
func statOf(path string) (*syscall.Stat_t, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	return &st, nil
}
