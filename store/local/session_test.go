//go:build linux

package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
	"github.com/tenurehq/tenure/storetest"
)

// sessionHelper is the helper process's mode "session" (see
// TestHelperProcess).
func sessionHelper(in *bufio.Scanner, say func(string, ...any)) error {
	ttl, err := time.ParseDuration(os.Getenv("HELPER_TTL"))
	if err != nil {
		return err
	}
	s, err := local.Open(os.Getenv("HELPER_DIR"))
	if err != nil {
		return err
	}
	ctx := context.Background()
	ss, err := s.OpenSession(ctx, ttl)
	if err != nil {
		return err
	}
	var terms []string
	for _, key := range strings.Split(os.Getenv("HELPER_KEYS"), ",") {
		l, err := ss.Acquire(ctx, key, "child", "")
		if err != nil {
			return err
		}
		terms = append(terms, strconv.FormatUint(l.Term, 10))
	}
	say("acquired %s", strings.Join(terms, ","))
	for in.Scan() {
		switch _, err := ss.KeepAlive(ctx); {
		case err == nil:
			say("kept")
		case errors.Is(err, tenure.ErrLost):
			say("lost")
		default:
			say("error %v", err)
		}
	}
	return nil
}

// sessionKeys returns n keys for a test.
func sessionKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s/%03d", prefix, i)
	}
	return keys
}

// takeAll acquires every key through s, checking that each is free at
// once (no Wait: its holder is known to be gone) at a term above terms[i].
func takeAll(t *testing.T, s *local.Store, keys []string, terms []uint64) {
	t.Helper()
	for i, key := range keys {
		l, err := s.Acquire(context.Background(), key, "parent", time.Minute)
		if err != nil {
			t.Fatalf("Acquire of %q after its session ended: %v", key, err)
		}
		if l.Term <= terms[i] || l.Wait != 0 {
			t.Fatalf("Acquire of %q after its session ended: term %d wait %s, want a term above %d and no wait", key, l.Term, l.Wait, terms[i])
		}
	}
}

// A process holding many keys in one session that is killed with SIGKILL
// frees every key at once, long before the session's 30s TTL: the kernel
// closes the session file and drops its lock, which wakes the watchers of
// the keys, and every Acquire finds the grants over, with no Wait.
func TestSessionCrashFreesAll(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	dir := t.TempDir()
	s := open(t, dir)
	keys := sessionKeys("crash", 50)
	c, terms := startSessionChild(t, dir, ttl, keys)
	first, last := watchHeld(t, s, keys[0], "child"), watchHeld(t, s, keys[len(keys)-1], "child")
	if _, err := s.Acquire(context.Background(), keys[1], "parent", ttl); !errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire while the child's session lives: %v, want ErrHeld", err)
	}
	c.send("keepalive")
	if got := c.line(); got != "kept" {
		t.Fatalf("the child's KeepAlive: %q, want kept", got)
	}
	killed := time.Now()
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, first, 5*time.Second, "the end of the child's session", free)
	storetest.Await(t, last, 5*time.Second, "the end of the child's session", free)
	woken := time.Since(killed)
	takeAll(t, s, keys, terms)
	if d := time.Since(killed); d >= ttl/6 {
		t.Fatalf("taking over %d keys took %s after the kill, too close to the TTL of %s to come from the crash", len(keys), d, ttl)
	}
	t.Logf("SIGKILL → watches woken: %s → %d keys acquired: %s", woken, len(keys), time.Since(killed))
}

// Closing a handle ends its sessions as its process's death would: every
// grant in them is free at once, and watchers in other handles see it.
func TestSessionEndsWithHandle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	ss := storetest.OpenSession(t, a, time.Minute)
	keys := sessionKeys("handle", 10)
	var terms []uint64
	for _, key := range keys {
		terms = append(terms, storetest.AcquireIn(t, ss, key, "alpha", "").Term)
	}
	ch := watchHeld(t, b, keys[3], "alpha")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, 5*time.Second, "the end of the closed handle's session", free)
	takeAll(t, b, keys, terms)
	if _, err := ss.KeepAlive(context.Background()); !errors.Is(err, tenure.ErrClosed) && !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive after the handle closed: %v, want ErrClosed or ErrLost", err)
	}
}

// sessionFile returns the path of ss's session file in dir.
func sessionFile(dir string, ss tenure.StoreSession) string {
	return filepath.Join(dir, local.SessionsDir, local.SessionID(ss))
}

// A session file that is a symbolic link, a FIFO, another user's file or
// does not decode is refused with an error naming it: never followed,
// never read from a FIFO, never taken for a live session (even when what
// the link points to, or the foreign file, is the live session's own
// file). A session whose file was replaced ends for its holder.
func TestSessionFileRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		root     bool  // needs root (chown)
		target   error // the readers' error
		replaced bool  // the holder's file is no longer in place: KeepAlive fails
		tamper   func(t *testing.T, path string)
	}{
		{"symlink", false, local.ErrUnsafe, true, func(t *testing.T, path string) {
			// The link leads to the holder's own file, locked and
			// unexpired: following it would call the grant live.
			if err := os.Rename(path, path+".real"); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Base(path)+".real", path); err != nil {
				t.Fatal(err)
			}
		}},
		{"fifo", false, local.ErrUnsafe, true, func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mkfifo(path, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"foreign", true, local.ErrUnsafe, false, func(t *testing.T, path string) {
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupt", false, local.ErrCorrupt, false, func(t *testing.T, path string) {
			// Written in place: the holder still holds the lock.
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt([]byte("garbage!"), 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("needs root to give the file to another uid (nobody); run the tests as root to cover it")
			}
			dir := t.TempDir()
			a, b := open(t, dir), open(t, dir)
			ss := storetest.OpenSession(t, a, time.Minute)
			const key = "refused"
			storetest.AcquireIn(t, ss, key, "alpha", "")
			path := sessionFile(dir, ss)
			c.tamper(t, path)
			wantOneLine(t, "Get", getWithin(t, b, key, 5*time.Second), c.target, path)
			_, err := b.Acquire(context.Background(), key, "beta", time.Minute)
			wantOneLine(t, "Acquire", err, c.target, path)
			_, err = ss.KeepAlive(context.Background())
			if c.replaced {
				if !errors.Is(err, tenure.ErrLost) {
					t.Fatalf("KeepAlive of a session whose file was replaced: %v, want ErrLost", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("KeepAlive: %v", err)
			}
		})
	}
}

// A session file deleted from outside ends the session for its holder,
// whose next KeepAlive fails, and the next holder of its keys waits one
// TTL: the session's expiry went with the file, and its holder may have
// kept it alive just before.
func TestSessionFileDeleted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	const ttl = time.Minute
	ss := storetest.OpenSession(t, a, ttl)
	const key = "deleted"
	l := storetest.AcquireIn(t, ss, key, "alpha", "")
	storetest.KeepAlive(t, ss)
	if err := os.Remove(sessionFile(dir, ss)); err != nil {
		t.Fatal(err)
	}
	next, err := b.Acquire(context.Background(), key, "beta", time.Second)
	if err != nil {
		t.Fatalf("Acquire after the session file was deleted: %v", err)
	}
	if next.Term <= l.Term || next.Wait < ttl {
		t.Fatalf("Acquire after the session file was deleted: term %d wait %s, want a term above %d and a wait of at least %s", next.Term, next.Wait, l.Term, ttl)
	}
	if _, err := ss.KeepAlive(context.Background()); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive after its file was deleted: %v, want ErrLost", err)
	}
}

// inotifyEvent is one event of watchFiles.
type inotifyEvent struct {
	path string
	mask uint32
}

// fileEvents returns every open, write, close, create, delete, rename and
// attribute change in dir, .terms and .sessions while fn runs.
func fileEvents(t *testing.T, dir string, fn func()) []inotifyEvent {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	const mask = unix.IN_OPEN | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_CLOSE_WRITE | unix.IN_CLOSE_NOWRITE |
		unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	dirs := map[int]string{}
	for _, d := range []string{dir, filepath.Join(dir, local.TermsDir), filepath.Join(dir, local.SessionsDir)} {
		wd, err := unix.InotifyAddWatch(fd, d, mask)
		if err != nil {
			t.Fatal(err)
		}
		dirs[wd] = d
	}
	fn()
	// A file created after fn marks the end of its events.
	marker := filepath.Join(dir, "marker")
	writeFile(t, marker, nil)
	var evs []inotifyEvent
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)]), "\x00")
			off += unix.SizeofInotifyEvent + int(ev.Len)
			p := filepath.Join(dirs[int(ev.Wd)], name)
			if p == marker {
				return evs
			}
			evs = append(evs, inotifyEvent{p, ev.Mask})
		}
	}
}

// KeepAlive writes the session file and nothing else, with one write
// whatever the number of grants: no record or .terms file is opened,
// written or renamed. A record changed from outside costs one read.
func TestSessionKeepAliveTouchesOnlyItsFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ss := storetest.OpenSession(t, s, time.Minute)
	keys := sessionKeys("touch", 100)
	for _, key := range keys {
		storetest.AcquireIn(t, ss, key, "alpha", "")
	}
	sess := sessionFile(dir, ss)
	// Once the records' times are old enough to show any later write (see
	// doc.go), a KeepAlive reads them once and from then on only stats.
	time.Sleep(local.StampSettle + 10*time.Millisecond)
	storetest.KeepAlive(t, ss)
	w0, r0 := local.SessionCounts(ss)
	evs := fileEvents(t, dir, func() {
		for range 3 {
			if gone := storetest.KeepAlive(t, ss); len(gone) != 0 {
				t.Fatalf("KeepAlive reported gone: %+v", gone)
			}
		}
	})
	writes := 0
	for _, ev := range evs {
		if ev.path != sess || ev.mask != unix.IN_MODIFY {
			t.Errorf("KeepAlive of %d grants touched %s (inotify mask %#x); want only writes to the session file %s", len(keys), ev.path, ev.mask, sess)
		}
		writes++
	}
	// inotify merges identical events in a row: the three writes may
	// show as one.
	if w1, r1 := local.SessionCounts(ss); w1-w0 != 3 || r1 != r0 || writes == 0 {
		t.Errorf("3 keep-alives of %d grants: %d session file writes (%d events seen by inotify) and %d record reads, want 3 writes and no read", len(keys), w1-w0, writes, r1-r0)
	}
	if err := local.OverwriteRecord(dir, keys[42], "mallory"); err != nil {
		t.Fatal(err)
	}
	gone := storetest.KeepAlive(t, ss)
	if len(gone) != 1 || gone[0].Key != keys[42] {
		t.Fatalf("KeepAlive after one record was overwritten: gone %+v, want just %q", gone, keys[42])
	}
	if _, r2 := local.SessionCounts(ss); r2-r0 != 1 {
		t.Errorf("KeepAlive after one record was overwritten read %d records, want 1", r2-r0)
	}
}

// BenchmarkSessionKeepAlive measures a KeepAlive of a session holding
// 1, 100 and 1000 grants, none changed, and reports the files it wrote.
//
//	go test -run '^$' -bench SessionKeepAlive ./store/local
func BenchmarkSessionKeepAlive(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("grants=%d", n), func(b *testing.B) {
			s := open(b, b.TempDir())
			ss := storetest.OpenSession(b, s, time.Hour)
			for _, key := range sessionKeys("bench", n) {
				storetest.AcquireIn(b, ss, key, "alpha", "")
			}
			// Past the first read of each new grant's record (see doc.go):
			// the steady state is measured.
			time.Sleep(local.StampSettle + 10*time.Millisecond)
			if _, err := ss.KeepAlive(context.Background()); err != nil {
				b.Fatal(err)
			}
			w0, r0 := local.SessionCounts(ss)
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				if _, err := ss.KeepAlive(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			w, r := local.SessionCounts(ss)
			b.ReportMetric(float64(w-w0)/float64(b.N), "files-written/op")
			b.ReportMetric(float64(r-r0)/float64(b.N), "records-read/op")
		})
	}
}

// A record overwritten in place right after its grant, with a record of
// the same length, has the size and, on most file systems, the times of
// the grant's own write: the session's KeepAlive still reports the grant
// gone (it reads a record until its times are old enough to show a later
// write).
func TestSessionSameSizeOverwriteSeen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ss := storetest.OpenSession(t, s, time.Minute)
	for i := range 20 {
		key := fmt.Sprintf("same-size/%d", i)
		storetest.AcquireIn(t, ss, key, "alpha", "")
		if gone := storetest.KeepAlive(t, ss); len(gone) != 0 {
			t.Fatalf("KeepAlive reported gone: %+v", gone)
		}
		if err := local.OverwriteRecord(dir, key, "oscar"); err != nil {
			t.Fatal(err)
		}
		if gone := storetest.KeepAlive(t, ss); len(gone) != 1 || gone[0].Key != key {
			t.Fatalf("KeepAlive after %q was overwritten with a record of the same length: gone %+v, want its grant", key, gone)
		}
	}
}

// BenchmarkRenew measures [local.Store.Renew] of one grant, what each key
// costs per renewal without a session, for comparison with
// BenchmarkSessionKeepAlive.
func BenchmarkRenew(b *testing.B) {
	s := open(b, b.TempDir())
	ctx := context.Background()
	l, err := s.Acquire(ctx, "bench/renew", "alpha", time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if err := s.Renew(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessionAcquire measures taking 100 free keys in a session, one
// Acquire at a time (an fsync pair each) and in one AcquireBatch (one
// syncfs), and reports the cost per key.
//
//	go test -run '^$' -bench SessionAcquire ./store/local
func BenchmarkSessionAcquire(b *testing.B) {
	const n = 100
	for _, batch := range []bool{false, true} {
		b.Run(fmt.Sprintf("batch=%t", batch), func(b *testing.B) {
			s := open(b, b.TempDir())
			ss := storetest.OpenSession(b, s, time.Hour)
			ba := ss.(tenure.BatchAcquirer)
			ctx := context.Background()
			for i := range b.N {
				reqs := make([]tenure.AcquireRequest, n)
				for j := range reqs {
					reqs[j] = tenure.AcquireRequest{Key: fmt.Sprintf("bench/%d/%d", i, j), Identity: "alpha"}
				}
				if batch {
					for _, r := range ba.AcquireBatch(ctx, reqs) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
					continue
				}
				for _, r := range reqs {
					if _, err := ss.Acquire(ctx, r.Key, r.Identity, ""); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/key")
		})
	}
}

// startSessionChild starts a helper holding keys in one session of ttl and
// returns it with the terms of its grants.
func startSessionChild(t *testing.T, dir string, ttl time.Duration, keys []string) (*child, []uint64) {
	t.Helper()
	c := startChild(t, "session", []string{"HELPER_DIR=" + dir, "HELPER_TTL=" + ttl.String(), "HELPER_KEYS=" + strings.Join(keys, ",")})
	got, ok := strings.CutPrefix(c.line(), "acquired ")
	if !ok {
		t.Fatalf("helper said %q, want \"acquired TERMS\"", got)
	}
	var terms []uint64
	for _, f := range strings.Split(got, ",") {
		term, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			t.Fatalf("helper's terms %q: %v", got, err)
		}
		terms = append(terms, term)
	}
	return c, terms
}

// A session whose process is alive but stopped keeps its file locked, yet
// every grant in it ends when its TTL passes after the last keep-alive,
// not earlier; once resumed, its KeepAlive fails.
func TestSessionStalledHolderLosesByTTL(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	dir := t.TempDir()
	s := open(t, dir)
	keys := sessionKeys("stalled", 3)
	c, terms := startSessionChild(t, dir, ttl, keys)
	sent := time.Now() // the child's store reads its clock after this
	c.send("keepalive")
	if got := c.line(); got != "kept" {
		t.Fatalf("the child's KeepAlive: %q, want kept", got)
	}
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ch := watchHeld(t, s, keys[2], "child")
	if _, err := s.Acquire(context.Background(), keys[0], "parent", ttl); !errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire while the stopped session's TTL runs: %v, want ErrHeld", err)
	}
	storetest.Await(t, ch, ttl+2*time.Second, "the session's expiry", free)
	freed := time.Now()
	// 1% allowed for the difference between CLOCK_BOOTTIME and Go's clock.
	if early := sent.Add(ttl - ttl/100).Sub(freed); early > 0 {
		t.Fatalf("the stopped session's grants ended %s before its TTL passed", early)
	}
	takeAll(t, s, keys, terms)
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.send("keepalive")
	if got := c.line(); got != "lost" {
		t.Fatalf("the resumed session's KeepAlive: %q, want lost", got)
	}
	for i, key := range keys {
		if r, err := s.Get(context.Background(), key); err != nil || r.Holder != "parent" || r.Term <= terms[i] {
			t.Fatalf("after the stale KeepAlive, Get(%q) = %+v, %v; want parent holding a term above %d", key, r, err, terms[i])
		}
	}
}

// A keep-alive whose write lands only after the session's expiry fails,
// and ends the session: meanwhile another process may have judged the
// session over and taken its keys, so the holder must not think it still
// leads. Here the expiry passes, and another handle takes a key, between
// the keep-alive's start and its write.
func TestSessionKeepAliveTooLate(t *testing.T) {
	t.Parallel()
	const ttl = 200 * time.Millisecond
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	ss := storetest.OpenSession(t, a, ttl)
	keys := sessionKeys("late", 2)
	var terms []uint64
	for _, key := range keys {
		terms = append(terms, storetest.AcquireIn(t, ss, key, "alpha", "").Term)
	}
	var taken tenure.Lease
	local.BeforeKeepAliveWrite(ss, func() {
		// The session's expiry is what is waited for: poll until another
		// handle can take the key.
		for {
			l, err := b.Acquire(context.Background(), keys[0], "beta", time.Minute)
			if err == nil {
				taken = l
				return
			}
			if !errors.Is(err, tenure.ErrHeld) {
				t.Errorf("Acquire while the keep-alive waits: %v", err)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	if _, err := ss.KeepAlive(context.Background()); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("a keep-alive written after the session expired: %v, want ErrLost", err)
	}
	if taken.Term <= terms[0] {
		t.Fatalf("the key taken meanwhile has term %d, not above %d", taken.Term, terms[0])
	}
	// The session ended: its other key is free at once, without waiting
	// for the expiry the late write announced.
	takeAll(t, b, keys[1:], terms[1:])
}
