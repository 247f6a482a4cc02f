//go:build linux

package local_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tenurehq/tenure/store/local"
)

// TestOpenRefusesUnsafeParents: a user who may rename entries of a
// directory above the state directory can move the state directory aside
// (rename needs no access to the directory moved within its parent). The
// next Open then created a fresh directory in its place and granted the
// key again, while the holder that opened the old one still led: two
// leaders, and in a new process terms restarting at 1. Open refuses a
// parent writable by others unless it is sticky (/tmp), or (unless the
// store is shared with a group) owned by another user, naming it and the
// fix.
func TestOpenRefusesUnsafeParents(t *testing.T) {
	t.Parallel()
	base := openTempDir(t)
	mkdir := func(path string, mode os.FileMode) string {
		t.Helper()
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	wide := mkdir(filepath.Join(base, "open"), 0o777)
	state := filepath.Join(wide, "a", "state")
	_, err := local.Open(state)
	wantOneLine(t, "Open under a 0777 parent", err, local.ErrUnsafe, wide, "chmod o-w "+wide)
	if _, err := os.Lstat(filepath.Join(wide, "a")); err == nil {
		t.Errorf("Open created %s under a parent anyone can write", filepath.Join(wide, "a"))
	}

	// What the check prevents: with the parent made safe, the holder's
	// directory moved aside would have let a second Open lead too.
	if err := os.Chmod(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	a := open(t, state)
	acquire(t, a, "job", "alpha", time.Minute)
	if err := os.Chmod(wide, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(wide, "a"), filepath.Join(wide, "moved")); err != nil {
		t.Fatal(err)
	}
	_, err = local.Open(state)
	wantOneLine(t, "Open after the state directory was moved aside", err, local.ErrUnsafe, wide)

	sticky := mkdir(filepath.Join(base, "sticky"), 0o777|os.ModeSticky)
	s, err := local.Open(filepath.Join(sticky, "state"))
	if err != nil {
		t.Fatalf("Open under a sticky 1777 parent (as /tmp): %v", err)
	}
	s.Close()

	if os.Geteuid() != 0 {
		t.Log("not root: the case of a parent owned by another user is skipped (it needs chown)")
		return
	}
	theirs := mkdir(filepath.Join(base, "theirs"), 0o755)
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err = local.Open(filepath.Join(theirs, "state"))
	wantOneLine(t, "Open under another user's parent", err, local.ErrUnsafe, theirs, "owned by uid 65534")
	// A group's directory often belongs to one of its members, who may
	// take and break every lease of a group-shared store anyway.
	s, err = local.Open(filepath.Join(theirs, "shared"), local.GroupShared())
	if err != nil {
		t.Fatalf("group-shared Open under a member's parent: %v", err)
	}
	s.Close()

}

// TestOpenRefusesParentsAnotherGroupMayWrite: a group's members can
// rename entries of a directory the group may write; in a private store
// that is another party, unless the group is the user's own private group
// (umask 002 setups) or the store is shared with that group on purpose.
func TestOpenRefusesParentsAnotherGroupMayWrite(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("not root: a directory of another group needs chown")
	}
	base := openTempDir(t)
	mkdir := func(path string, mode os.FileMode) string {
		t.Helper()
		if err := os.Mkdir(path, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	groups := mkdir(filepath.Join(base, "groups"), 0o775)
	if err := os.Chown(groups, 0, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := local.Open(filepath.Join(groups, "state"))
	wantOneLine(t, "Open under a parent writable by group 65534", err, local.ErrUnsafe, groups, "chmod g-w "+groups)
	s, err := local.Open(filepath.Join(groups, "shared"), local.GroupShared())
	if err != nil {
		t.Fatalf("group-shared Open under a parent its group may write: %v", err)
	}
	s.Close()
	own := mkdir(filepath.Join(base, "own"), 0o775) // root's, group root: root's private group
	s, err = local.Open(filepath.Join(own, "state"))
	if err != nil {
		t.Fatalf("Open under a 0775 parent of the user's private group: %v", err)
	}
	s.Close()
}
