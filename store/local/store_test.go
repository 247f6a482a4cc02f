//go:build linux

package local_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
	"github.com/tenurehq/tenure/storetest"
)

// statePath returns the one record file in dir.
func statePath(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.state"))
	if err != nil || len(m) != 1 {
		t.Fatalf("want one state file in %s, found %v (%v)", dir, m, err)
	}
	return m[0]
}

// acquire acquires key on s for id with ttl, or fails the test.
func acquire(t *testing.T, s *local.Store, key, id string, ttl time.Duration) tenure.Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), key, id, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readFile returns the contents of the file at path, or fails the test.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeFile writes data to the file at path (mode 0600), or fails the test.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// copyTestBinary copies the running test binary into dir, where a process
// of another user (nobody) may run it, and returns its path.
func copyTestBinary(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "local.test")
	if err := os.WriteFile(bin, readFile(t, os.Args[0]), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// asNobody returns a command that runs bin with the uid and gid of nobody.
func asNobody(bin string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}

// openFails checks that Open(dir) fails with a one-line error naming dir.
func openFails(t *testing.T, dir string) {
	t.Helper()
	s, err := local.Open(dir)
	if err == nil {
		s.Close()
		t.Fatalf("Open(%q) succeeded", dir)
	}
	if msg := err.Error(); !strings.Contains(msg, dir) || strings.Contains(msg, "\n") {
		t.Errorf("Open(%q): error %q, want one line naming the directory", dir, msg)
	}
}

func grantAndRelease(t *testing.T, s *local.Store, key string) tenure.Lease {
	t.Helper()
	l := acquire(t, s, key, "alpha", time.Minute)
	if err := s.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return l
}

// watch watches key on s until the test ends.
func watch(t *testing.T, s *local.Store, key string) <-chan tenure.Record {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// watchHeld watches key on s until the test ends; it returns once the
// watch shows holder.
func watchHeld(t *testing.T, s *local.Store, key, holder string) <-chan tenure.Record {
	t.Helper()
	ch := watch(t, s, key)
	storetest.Await(t, ch, 5*time.Second, "the grant to "+holder, func(r tenure.Record) bool { return r.Holder == holder })
	return ch
}

// withHistory opens a store on a new directory, grants and releases key
// there n times (n ≥ 1), and returns the directory, the store and the last
// grant.
func withHistory(t *testing.T, key string, n int) (string, *local.Store, tenure.Lease) {
	t.Helper()
	dir := t.TempDir()
	s := open(t, dir)
	var last tenure.Lease
	for range n {
		last = grantAndRelease(t, s, key)
	}
	return dir, s, last
}

// openTempDir returns a new directory in the system's temporary directory
// (not t.TempDir, whose parent only its owner may enter) that every user
// may enter and list, removed when the test ends.
func openTempDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "tenure-local-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// acquireNext acquires the free key on s as "beta" and checks that the
// grant's term is the one after prev; how says in what state the key was.
func acquireNext(t *testing.T, s *local.Store, key string, prev uint64, how string) tenure.Lease {
	t.Helper()
	l, err := s.Acquire(context.Background(), key, "beta", time.Minute)
	if err != nil || l.Term != prev+1 {
		t.Fatalf("Acquire %s = %+v, %v; want term %d", how, l, err, prev+1)
	}
	return l
}

// Terms never go backwards: a damaged record is an error naming the file,
// never a key that restarts at term 1. (An empty record reads as a deleted
// one: TestEmptyRecordIsADeletedOne.)
func TestCorruptStateIsAnError(t *testing.T) {
	t.Parallel()
	const key = "precious"
	dir, s, last := withHistory(t, key, 3)
	path := statePath(t, dir)
	good := readFile(t, path)
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)/2] ^= 1
	for name, data := range map[string][]byte{
		"truncated":   good[:len(good)-3],
		"one byte":    good[:1],
		"byte flip":   flipped,
		"garbage":     []byte("not a state file at all, but long enough to have a header"),
		"new version": append([]byte("tenure\x00L\x00\x09"), good[10:]...),
	} {
		writeFile(t, path, data)
		_, aerr := s.Acquire(context.Background(), key, "beta", time.Minute)
		_, gerr := s.Get(context.Background(), key)
		for call, err := range map[string]error{"Acquire": aerr, "Get": gerr} {
			if !errors.Is(err, local.ErrCorrupt) || !strings.Contains(err.Error(), path) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s with a %s state file: %v; want a one-line ErrCorrupt naming %s", call, name, err, path)
			}
		}
	}
	// Restoring the record restores the key, with terms still growing.
	writeFile(t, path, good)
	acquireNext(t, s, key, last.Term, "after repair")
}

// A crash in the middle of writing a record leaves its temporary file,
// which changes nothing.
func TestLeftoverTempFileIsHarmless(t *testing.T) {
	t.Parallel()
	const key = "crashy"
	dir, s, l := withHistory(t, key, 1)
	writeFile(t, statePath(t, dir)+".tmp", []byte("half a rec"))
	if r, err := s.Get(context.Background(), key); err != nil || r.Term != l.Term || r.Held() {
		t.Fatalf("Get with a leftover temp file = %+v, %v", r, err)
	}
	acquireNext(t, s, key, l.Term, "with a leftover temp file")
}

// A stale liveness file of the next term, left by an acquisition that
// crashed before writing its record, does not block the key.
func TestStaleHolderFileIsReplaced(t *testing.T) {
	t.Parallel()
	const key = "stale"
	dir, s, l := withHistory(t, key, 1)
	next := strings.TrimSuffix(statePath(t, dir), ".state") + ".holder." + strconv.FormatUint(l.Term+1, 10)
	writeFile(t, next, nil)
	acquireNext(t, s, key, l.Term, "over a stale holder file")
}

// Release wakes a watcher through inotify, not through the expiry timer:
// the TTL is a minute.
func TestReleaseWakesWatcher(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	const key = "wake"
	ch := watch(t, b, key)
	storetest.Await(t, ch, 5*time.Second, "the initial record", free)
	l := acquire(t, a, key, "alpha", time.Minute)
	storetest.Await(t, ch, 5*time.Second, "the acquisition", func(r tenure.Record) bool { return r.Holder == "alpha" && r.Term == l.Term })
	released := time.Now()
	if err := a.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, 10*time.Second, "the release", func(r tenure.Record) bool { return !r.Held() && r.Term == l.Term })
	t.Logf("Release → watch delivery: %s", time.Since(released))
}

// Closing a handle ends its grants at once, as a crash would, and its
// watchers learn of it.
func TestCloseEndsGrants(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	const key = "closing"
	l := acquire(t, a, key, "alpha", time.Minute)
	ch := watchHeld(t, b, key, "alpha")
	aw, err := a.Watch(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	for range aw { // Close ends a's watch even with a background context
	}
	storetest.Await(t, ch, 5*time.Second, "the end of the closed handle's grant", free)
	if err := b.Renew(context.Background(), l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew of a closed handle's grant through another handle: %v, want ErrLost", err)
	}
	if _, err := a.LeaseFiles(l); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("LeaseFiles after Close: %v, want ErrClosed", err)
	}
	if _, err := a.Watch(context.Background(), key); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A forged lease passed to the holding handle closes nothing.
func TestForgedLeaseKeepsOwnersFile(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	const key = "forged"
	l := acquire(t, s, key, "alpha", time.Minute)
	for _, f := range []tenure.Lease{
		{Key: key, Identity: "mallory", Term: l.Term, TTL: l.TTL, Token: l.Token},
		{Key: key + "-x", Identity: l.Identity, Term: l.Term, TTL: l.TTL, Token: l.Token},
	} {
		if err := s.Release(context.Background(), f); !errors.Is(err, tenure.ErrLost) {
			t.Fatalf("Release(%+v): %v, want ErrLost", f, err)
		}
	}
	if _, err := s.LeaseFiles(l); err != nil {
		t.Fatalf("LeaseFiles after forged calls: %v", err)
	}
	if err := s.Renew(context.Background(), l); err != nil {
		t.Fatalf("Renew after forged calls: %v", err)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// Watches leave no goroutine and no descriptor behind once they end. Not
// parallel: it counts the process's goroutines and descriptors.
func TestWatchLeaksNothing(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	const key = "leaks"
	if _, err := s.Get(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	goroutines, fds := runtime.NumGoroutine(), countFDs(t)
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		var chans []<-chan tenure.Record
		for range 10 {
			ch, err := s.Watch(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			<-ch // the initial record: the watch is running
			chans = append(chans, ch)
		}
		if n := countFDs(t); n != fds+1 {
			t.Fatalf("%d descriptors with 10 watches, want %d: they share one", n, fds+1)
		}
		cancel()
		for _, ch := range chans {
			for range ch {
			}
		}
	}
	if n := countFDs(t); n != fds {
		t.Fatalf("%d descriptors after the watches ended, %d before", n, fds)
	}
	// A closed channel means the watch released its descriptor and its
	// reader; the goroutine that closed it may still be returning.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after the watches ended, %d before", runtime.NumGoroutine(), goroutines)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	file := filepath.Join(base, "file")
	writeFile(t, file, nil)
	openFails(t, file)
	openFails(t, filepath.Join(file, "sub"))
}

// A directory the process may not use gives a one-line error naming it.
// Permission bits do not bind root, so as root the check runs in a helper
// process with the uid and gid of nobody.
func TestOpenUnusableDir(t *testing.T) {
	t.Parallel()
	// Not t.TempDir, whose parent only its owner may enter.
	base := openTempDir(t)
	locked := filepath.Join(base, "locked")
	if err := os.Mkdir(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(base, "read-only")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	dirs := []string{locked, filepath.Join(locked, "sub"), readOnly, filepath.Join(readOnly, "sub")}
	if os.Geteuid() != 0 {
		if err := os.Chmod(locked, 0o000); err != nil {
			t.Fatal(err)
		}
		for _, dir := range dirs {
			openFails(t, dir)
		}
		return
	}
	bin := copyTestBinary(t, base)
	for _, dir := range dirs {
		c := startChildCmd(t, asNobody(bin), "open", []string{"HELPER_DIR=" + dir})
		msg, ok := strings.CutPrefix(c.line(), "error ")
		if !ok {
			t.Fatalf("nobody could open %s", dir)
		}
		// read-only is root's: nobody is refused for not owning it.
		if !strings.Contains(msg, dir) || !strings.Contains(msg, "permission denied") && !strings.Contains(msg, "owned by uid 0") {
			t.Errorf("Open(%q) as nobody: error %q, want one naming the directory and the denied permission or the owner", dir, msg)
		}
		t.Logf("as nobody: %s", msg)
	}
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "b")
	s := open(t, dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("created %s with mode %s, want a 0700 directory", dir, fi.Mode())
	}
	if s.Dir() != dir {
		t.Fatalf("Dir() = %q, want %q", s.Dir(), dir)
	}
}

func TestURL(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	ctx := context.Background()
	dir := t.TempDir()
	for url, want := range map[string]string{
		"file://" + dir:                dir,
		"file://localhost" + dir + "/": dir,
		"file://":                      filepath.Join(state, "tenure"),
	} {
		st, err := tenure.Open(ctx, url)
		if err != nil {
			t.Fatalf("Open(%q): %v", url, err)
		}
		if got := st.(*local.Store).Dir(); got != want {
			t.Errorf("Open(%q) uses %q, want %q", url, got, want)
		}
		st.Close()
	}
	for _, url := range []string{
		"file:relative/dir",
		"file://otherhost/var/lib/tenure",
		"file:///var/lib/tenure?password=hunter2",
		"file://user:hunter2@localhost/var/lib/tenure",
	} {
		_, err := tenure.Open(ctx, url)
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", url, err)
		} else if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): error %q shows the secret", url, err)
		}
	}
}

// The default directory is per user and never a shared one like /tmp,
// where another user could create it first: XDG_STATE_HOME, HOME,
// XDG_RUNTIME_DIR, /run/user/UID, else an error saying to pass --store.
func TestDefaultDir(t *testing.T) {
	run := t.TempDir()
	defer local.SetRunUserDir(run)()
	t.Setenv("XDG_STATE_HOME", "/xdg")
	t.Setenv("HOME", "/home/u")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/4242")
	for _, c := range []struct{ unset, want string }{
		{"", "/xdg/tenure"},
		{"XDG_STATE_HOME", "/home/u/.local/state/tenure"},
		{"HOME", "/run/user/4242/tenure"},
	} {
		if c.unset != "" {
			t.Setenv(c.unset, "")
		}
		if d, err := local.DefaultDir(); d != c.want || err != nil {
			t.Errorf("without %s: DefaultDir() = %q, %v; want %q", c.unset, d, err, c.want)
		}
	}
	t.Setenv("XDG_RUNTIME_DIR", "")
	if d, err := local.DefaultDir(); err == nil || !errors.Is(err, local.ErrNoDefaultDir) ||
		!strings.Contains(err.Error(), "--store file:///DIR") || strings.Contains(err.Error(), "\n") {
		t.Errorf("with no variable and no %s/UID: DefaultDir() = %q, %v; want a one-line ErrNoDefaultDir saying to pass --store file:///DIR", run, d, err)
	}
	uid := strconv.Itoa(os.Getuid())
	if err := os.Mkdir(filepath.Join(run, uid), 0o700); err != nil {
		t.Fatal(err)
	}
	if d, err := local.DefaultDir(); d != filepath.Join(run, uid, "tenure") || err != nil {
		t.Errorf("with %s/%s: DefaultDir() = %q, %v", run, uid, d, err)
	}
}

// A handle whose grants expire and are granted again keeps one liveness
// file open per key, not one per grant. Not parallel: it counts the
// process's descriptors.
func TestExpiredGrantsCloseTheirFiles(t *testing.T) {
	s := open(t, t.TempDir())
	const key, ttl = "expiring", 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, 5*time.Second, "the initial record", free)
	l, err := s.Acquire(ctx, key, "alpha", ttl)
	if err != nil {
		t.Fatal(err)
	}
	fds := countFDs(t)
	for range 10 {
		storetest.Await(t, ch, 5*time.Second, "the expiry", free)
		next, err := s.Acquire(ctx, key, "alpha", ttl)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.LeaseFiles(l); !errors.Is(err, tenure.ErrLost) {
			t.Fatalf("LeaseFiles of an expired grant: %v, want ErrLost", err)
		}
		if _, err := s.LeaseFiles(next); err != nil {
			t.Fatalf("LeaseFiles of the new grant: %v", err)
		}
		l = next
	}
	// More would be a leak; fewer happens when a descriptor of an earlier
	// test (a watch winding down) closes meanwhile.
	if n := countFDs(t); n > fds {
		t.Fatalf("%d descriptors after 10 expired grants, %d before", n, fds)
	}
}
