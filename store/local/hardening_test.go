//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
	"github.com/tenurehq/tenure/storetest"
)

// keyFile returns the path of key's file with suffix (".state", ".lock",
// ".holder.N") in dir, for a key made only of safe characters.
func keyFile(dir, key, suffix string) string { return filepath.Join(dir, "k-"+key+suffix) }

// wantOneLine fails unless err is a one-line error matching target and
// naming every string in names.
func wantOneLine(t *testing.T, what string, err, target error, names ...string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v, want an error matching %v", what, err, target)
	}
	msg := err.Error()
	for _, n := range names {
		if !strings.Contains(msg, n) {
			t.Errorf("%s: error %q does not name %q", what, msg, n)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("%s: error spans lines: %q", what, msg)
	}
}

// Symbolic links planted under the names of tenure's files are never
// followed: the file a link points to is neither written nor created.
// (The old store truncated the target of NAME.state.tmp and created the
// target of NAME.lock.)
func TestPlantedLinksAreNotFollowed(t *testing.T) {
	t.Parallel()
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	chosen := filepath.Join(outside, "chosen")
	const key = "linked"
	for _, name := range []string{".state.tmp", ".lock.tmp"} {
		if err := os.Symlink(victim, keyFile(dir, key, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(chosen, keyFile(dir, key, ".lock")); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	_, err := s.Acquire(context.Background(), key, "alpha", time.Minute)
	wantOneLine(t, "Acquire with a linked lock file", err, local.ErrUnsafe, keyFile(dir, key, ".lock"), "symbolic link")
	if _, err := os.Lstat(chosen); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the lock file's link target %s was created (%v)", chosen, err)
	}

	// Without the lock link, the grant works and writes nothing through
	// the temp-file links.
	if err := os.Remove(keyFile(dir, key, ".lock")); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, s, key, "alpha", time.Minute)
	if err := s.Renew(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "precious" {
		t.Errorf("the temp file's link target now holds %q (%v)", b, err)
	}

	// A record replaced by a link is an error, not a redirect.
	if err := os.Remove(keyFile(dir, key, ".state")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, keyFile(dir, key, ".state")); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(context.Background(), key)
	wantOneLine(t, "Get with a linked record", err, local.ErrUnsafe, keyFile(dir, key, ".state"), "symbolic link")
}

// An existing state directory must be the user's and closed to others;
// the error names it and the fix. A link to it planted by another user is
// not followed.
func TestOpenRefusesUnsafeDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	s, err := local.Open(open)
	if err == nil {
		s.Close()
	}
	wantOneLine(t, "Open of a 0777 directory", err, local.ErrUnsafe, open, "chmod go-w", "shared=group")

	groupw := filepath.Join(base, "group-writable")
	if err := os.Mkdir(groupw, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(groupw, 0o770); err != nil {
		t.Fatal(err)
	}
	s, err = local.Open(groupw)
	if err == nil {
		s.Close()
	}
	wantOneLine(t, "Open of a 0770 directory", err, local.ErrUnsafe, groupw, "chmod go-w")
	s, err = local.Open(groupw, local.GroupShared())
	if err == nil {
		s.Close()
	}
	wantOneLine(t, "GroupShared Open of a directory without setgid", err, local.ErrUnsafe, groupw, "chmod g+s")

	if os.Geteuid() != 0 {
		t.Log("not root: the cases of a directory and a link owned by another user are skipped (they need chown)")
		return
	}
	theirs := filepath.Join(base, "theirs")
	if err := os.Mkdir(theirs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	s, err = local.Open(theirs)
	if err == nil {
		s.Close()
	}
	wantOneLine(t, "Open of another user's directory", err, local.ErrUnsafe, theirs, "owned by uid 65534")

	mine := filepath.Join(base, "mine")
	link := filepath.Join(base, "link")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(mine, link); err != nil {
		t.Fatal(err)
	}
	// A link of this user is followed...
	s, err = local.Open(filepath.Join(link))
	if err != nil {
		t.Fatalf("Open through this user's link: %v", err)
	}
	s.Close()
	// ...one of another user is not.
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	s, err = local.Open(filepath.Join(link, "sub"))
	if err == nil {
		s.Close()
	}
	wantOneLine(t, "Open through another user's link", err, local.ErrUnsafe, link, "symbolic link owned by uid 65534")
	if _, err := os.Lstat(filepath.Join(mine, "sub")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open created %s through another user's link", filepath.Join(mine, "sub"))
	}
}

// modes returns the permission bits of every file under dir (the state
// directory and .terms), by name relative to dir.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	m := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		m[rel] = fi.Mode() & (fs.ModePerm | fs.ModeSetgid)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Files are 0600 in a private directory and 0660 in a group-shared one,
// whatever the umask (the old store made them 0666 less the umask).
func TestFileModes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		opts      []local.Option
		dir, file fs.FileMode
	}{
		{"private", nil, 0o700, 0o600},
		{"group", []local.Option{local.GroupShared()}, 0o770 | fs.ModeSetgid, 0o660},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		s, err := local.Open(dir, c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		l := acquire(t, s, "moded", "alpha", time.Minute)
		if err := s.Renew(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		ss := storetest.OpenSession(t, s, time.Minute)
		storetest.AcquireIn(t, ss, "moded-in-session", "alpha", "")
		storetest.KeepAlive(t, ss)
		for name, m := range modes(t, dir) {
			want := c.file
			if name == "." || name == ".terms" || name == ".sessions" {
				want = c.dir
			}
			if m != want {
				t.Errorf("%s: %s has mode %s, want %s", c.name, name, m, want)
			}
		}
		s.Close()
	}
}

// grab takes every lock a reader can try on f and describes the results;
// an error of the OFD write lock must be EBADF.
func grab(f *os.File) string {
	var res []string
	try := func(name string, err error) {
		if err != nil {
			res = append(res, name+"="+err.Error())
		} else {
			res = append(res, name+"=ok")
		}
	}
	try("flock-ex", unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB))
	try("ofd-wr", unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_WRLCK}))
	return strings.Join(res, " ")
}

// renewsAndHolds checks that the holder of l can still renew promptly and
// that another handle cannot take the key.
func renewsAndHolds(t *testing.T, holder, other *local.Store, l tenure.Lease, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := holder.Renew(ctx, l); err != nil {
		t.Fatalf("%s: the holder's Renew failed: %v", what, err)
	}
	var held *tenure.HeldError
	if _, err := other.Acquire(ctx, l.Key, "mallory", time.Minute); !errors.As(err, &held) {
		t.Fatalf("%s: another candidate's Acquire = %v, want HeldError", what, err)
	}
}

// A process that can open the files read-only cannot depose the holder:
// flock (which the store no longer uses) changes nothing, and an OFD write
// lock needs a writable descriptor (EBADF). Tested with this user's
// read-only descriptors; with the old flock-based store, a reader's
// flock -x on the lock file made the holder's Renew time out.
func TestReadOnlyDescriptorCannotDepose(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	const key = "guarded"
	l := acquire(t, a, key, "alpha", time.Minute)
	for _, suffix := range []string{".lock", fmt.Sprintf(".holder.%d", l.Term)} {
		path := keyFile(dir, key, suffix)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got := grab(f)
		if !strings.Contains(got, "ofd-wr="+unix.EBADF.Error()) {
			t.Errorf("locks on a read-only descriptor of %s: %s; want the OFD write lock refused with EBADF", path, got)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err = a.Renew(ctx, l)
		cancel()
		if err != nil {
			t.Fatalf("with a reader holding flock on %s: Renew = %v", path, err)
		}
	}
	renewsAndHolds(t, a, b, l, "with readers holding every lock they can")
}

// The same attack from another user: the files are 0600, so nobody cannot
// even open them for reading, and the holder renews. Needs root, to run
// the attacker as nobody.
func TestOtherUserCannotDepose(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the attacker as another uid (nobody); run the tests as root to cover it")
	}
	// A directory nobody may enter and list, as a private state directory
	// of a careless but not negligent user (0755) would be.
	base := openTempDir(t)
	dir := filepath.Join(base, "state")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := copyTestBinary(t, base)
	a, b := open(t, dir), open(t, dir)
	const key = "guarded"
	l := acquire(t, a, key, "alpha", time.Minute)
	for _, suffix := range []string{".lock", fmt.Sprintf(".holder.%d", l.Term), ".state"} {
		path := keyFile(dir, key, suffix)
		c := startChildCmd(t, asNobody(bin), "grab", []string{"HELPER_PATH=" + path})
		got := c.line()
		if !strings.HasPrefix(got, "error ") || !strings.Contains(got, "permission denied") {
			t.Errorf("nobody opening %s read-only: %q, want permission denied", path, got)
		}
		renewsAndHolds(t, a, b, l, "after nobody tried "+path)
	}
}

// getWithin runs Get in a goroutine and fails the test if it does not
// return within d (the old store blocked forever on a FIFO and read
// /dev/zero until it ran out of memory).
func getWithin(t *testing.T, s *local.Store, key string, d time.Duration) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := s.Get(context.Background(), key)
		done <- err
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		t.Fatalf("Get did not return within %s", d)
		return nil
	}
}

// A record replaced by a device, a FIFO or an oversized file is an error
// at once: reads are of regular files only, and bounded.
func TestRecordNotARegularFile(t *testing.T) {
	t.Parallel()
	const key = "weird"
	dir, s, _ := withHistory(t, key, 1)
	path := keyFile(dir, key, ".state")
	good := readFile(t, path)
	replace := func(make func() error) {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := make(); err != nil {
			t.Fatal(err)
		}
	}

	replace(func() error { return unix.Mkfifo(path, 0o600) })
	wantOneLine(t, "Get of a FIFO", getWithin(t, s, key, 5*time.Second), local.ErrUnsafe, path, "FIFO")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := s.Acquire(ctx, key, "beta", time.Minute)
	cancel()
	wantOneLine(t, "Acquire over a FIFO", err, local.ErrUnsafe, path, "FIFO")

	if os.Geteuid() == 0 {
		// A device node of this user in place of the record.
		replace(func() error { return unix.Mknod(path, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 5))) })
		wantOneLine(t, "Get of /dev/zero's device", getWithin(t, s, key, 5*time.Second), local.ErrUnsafe, path, "character device")
	}
	replace(func() error { return os.Symlink("/dev/zero", path) })
	wantOneLine(t, "Get of a link to /dev/zero", getWithin(t, s, key, 5*time.Second), local.ErrUnsafe, path, "symbolic link")

	replace(func() error { return os.WriteFile(path, make([]byte, 64<<20), 0o600) })
	wantOneLine(t, "Get of a 64 MiB record", getWithin(t, s, key, 5*time.Second), local.ErrCorrupt, path, "larger than the limit")

	// Nothing was reset: restoring the record restores the key.
	replace(func() error { return os.WriteFile(path, good, 0o600) })
	if _, err := s.Get(context.Background(), key); err != nil {
		t.Fatalf("Get after restoring the record: %v", err)
	}
}

// ?shared=group is the URL form of GroupShared; other values and other
// parameters are refused, never showing a secret.
func TestURLSharedGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "shared")
	st, err := tenure.Open(ctx, "file://"+dir+"?shared=group")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := fi.Mode() & (fs.ModePerm | fs.ModeSetgid); m != 0o770|fs.ModeSetgid {
		t.Errorf("?shared=group created %s with mode %s, want a setgid 0770 directory", dir, m)
	}
	// The same directory without the parameter is refused: it is open to
	// its group.
	_, err = tenure.Open(ctx, "file://"+dir)
	wantOneLine(t, "Open of a group directory without ?shared=group", err, local.ErrUnsafe, dir, "shared=group")
	for _, url := range []string{
		"file://" + dir + "?shared=world",
		"file://" + dir + "?shared=group&shared=group",
		"file://" + dir + "?token=hunter2",
	} {
		_, err := tenure.Open(ctx, url)
		if !errors.Is(err, tenure.ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): %v, want ErrInvalid not showing the value", url, err)
		}
	}
}

// TestTermsExhausted: a released key whose record was rewritten with the
// largest term there is cannot be granted again (the next term would wrap
// to 0, below every term handed out): Acquire fails with an error matching
// tenure.ErrTermsExhausted, which the elector does not retry.
func TestTermsExhausted(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	l, err := s.Acquire(context.Background(), "k", "a", time.Second)
	if err == nil {
		err = s.Release(context.Background(), l)
	}
	if err == nil {
		err = local.SetRecordTerm(dir, "k", 1<<64-1)
	}
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Acquire(context.Background(), "k", "b", time.Second)
	storetest.TermsExhausted(t, "Acquire", err, "k", "2^64-1")
}

// TestSessionTermsExhausted: as TestTermsExhausted, through a session's
// Acquire and AcquireBatch, for a released key and for one whose holder's
// session ended; in a batch, the other key is granted.
func TestSessionTermsExhausted(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for _, held := range []bool{false, true} {
		key := fmt.Sprint("k-", held)
		old := storetest.OpenSession(t, s, time.Minute)
		l := storetest.AcquireIn(t, old, key, "a", "")
		var err error
		if held {
			err = old.Close(context.Background()) // the holder's session ends with its grant
		} else {
			err = old.Release(context.Background(), l)
		}
		if err == nil {
			err = local.SetRecordTerm(dir, key, 1<<64-1)
		}
		if err != nil {
			t.Fatal(err)
		}
		storetest.SessionRefusesExhausted(t, func() tenure.StoreSession { return storetest.OpenSession(t, s, time.Minute) }, key, "2^64-1")
	}
}

// A directory planted under a record's name is an error naming the file,
// and stays where it was: a write never swaps it away.
func TestDirectoryAtARecordNameIsAnError(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"k-dir.state", ".terms/k-dir.term"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := local.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			planted := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Join(planted, "inside"), 0o700); err != nil {
				t.Fatal(err)
			}
			_, err = s.Acquire(context.Background(), "dir", "me", time.Minute)
			if err == nil {
				t.Fatalf("Acquire with a directory at %s succeeded", name)
			}
			if !strings.Contains(err.Error(), planted) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q does not name %s on one line", err, planted)
			}
			if fi, err := os.Stat(filepath.Join(planted, "inside")); err != nil || !fi.IsDir() {
				t.Errorf("the planted directory moved: %v", err)
			}
		})
	}
}
