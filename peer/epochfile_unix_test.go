//go:build unix

package peer_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure/peer"
)

// TestEpochFileNotARegularFile: a FIFO, a symbolic link or a directory
// where the epoch file goes (a careless edit, a hostile neighbour) is an
// error naming the file, at once. Load opened a FIFO and blocked until
// somebody wrote to it, so the node never started and said nothing; it
// read through a link to any file.
func TestEpochFileNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	f, err := peer.OpenEpochFile(dir, 7)
	if err != nil {
		t.Fatal(err)
	}
	// A valid epoch file elsewhere, which a followed link would pass off
	// as this member's.
	elsewhere, err := peer.OpenEpochFile(t.TempDir(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if err := elsewhere.Save(5); err != nil {
		t.Fatal(err)
	}
	other := elsewhere.Path()
	for name, plant := range map[string]func() error{
		"fifo":      func() error { return syscall.Mkfifo(f.Path(), 0o600) },
		"symlink":   func() error { return os.Symlink(other, f.Path()) },
		"directory": func() error { return os.Mkdir(f.Path(), 0o700) },
	} {
		if err := plant(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			e, err := f.Load()
			if err == nil {
				t.Errorf("%s: Load = epoch %d, want an error", name, e)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), f.Path()) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: Load = %v, want a one-line error naming %s", name, err, f.Path())
			}
		case <-time.After(5 * time.Second):
			// Unblock the read so the goroutine ends.
			if w, err := os.OpenFile(f.Path(), os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			<-done
			t.Errorf("%s: Load blocked", name)
		}
		if err := os.Remove(f.Path()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenEpochFileRefusesUnsafeDir: whoever can write the state
// directory can delete or rewrite the epoch file, and a member whose epoch
// went back issues fencing terms below ones already issued. Like the
// local store's directory, it must be the user's and closed to group and
// others, and so must be, to others, the directories above it (whoever may
// rename in one can move the state directory aside); OpenEpochFile
// refuses anything else, naming it and the fix.
func TestOpenEpochFileRefusesUnsafeDir(t *testing.T) {
	base := t.TempDir()
	for i, mode := range []os.FileMode{0o777, 0o770, 0o777 | os.ModeSticky, 0o720} {
		dir := filepath.Join(base, fmt.Sprint(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		_, err := peer.OpenEpochFile(dir, 1)
		if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "chmod go-w") {
			t.Errorf("OpenEpochFile of a %s directory = %v, want an error naming it and chmod go-w", mode, err)
		}
	}
	// A parent anyone may write, not sticky: anyone could move the state
	// directory aside and the member would start again from epoch 0.
	wide := filepath.Join(base, "wide")
	if err := os.Mkdir(wide, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wide, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.OpenEpochFile(filepath.Join(wide, "state"), 1); err == nil || !strings.Contains(err.Error(), "chmod o-w "+wide) {
		t.Errorf("OpenEpochFile under a 0777 parent = %v, want an error naming it and chmod o-w", err)
	}
	if err := os.Chmod(wide, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.OpenEpochFile(filepath.Join(wide, "state"), 1); err != nil {
		t.Errorf("OpenEpochFile under a sticky parent (as /tmp): %v", err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: the case of another user's directory is skipped (it needs chown)")
		return
	}
	theirsAbove := filepath.Join(base, "theirs-above")
	if err := os.Mkdir(theirsAbove, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirsAbove, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.OpenEpochFile(filepath.Join(theirsAbove, "state"), 1); err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("OpenEpochFile under another user's directory = %v, want an error naming its owner", err)
	}
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.OpenEpochFile(theirs, 1); err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("OpenEpochFile of another user's directory = %v, want an error naming its owner", err)
	}
	// A parent another group may write: its members could move the state
	// directory aside. Root's own group 0 is root's private group.
	groups := filepath.Join(base, "groups")
	if err := os.Mkdir(groups, 0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groups, 0o775); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.OpenEpochFile(filepath.Join(groups, "state"), 1); err != nil {
		t.Errorf("OpenEpochFile under a 0775 parent of root's group: %v", err)
	}
	if err := os.Chown(groups, 0, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := peer.OpenEpochFile(filepath.Join(groups, "state2"), 1); err == nil || !strings.Contains(err.Error(), "chmod g-w "+groups) {
		t.Errorf("OpenEpochFile under a parent group 65534 may write = %v, want an error naming it and chmod g-w", err)
	}
}
