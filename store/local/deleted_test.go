//go:build linux

package local_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
	"github.com/tenurehq/tenure/storetest"
)

// removeKeyFiles deletes every file of key in dir, the record first, as an
// operator cleaning up with rm DIR/k-KEY.* would; .terms is left alone.
func removeKeyFiles(t *testing.T, dir, key string) {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "k-"+key+".*"))
	if err != nil || len(m) == 0 {
		t.Fatalf("no files of %q in %s (%v)", key, dir, err)
	}
	slices.SortFunc(m, func(a, b string) int {
		return cmp.Compare(boolInt(!strings.HasSuffix(a, ".state")), boolInt(!strings.HasSuffix(b, ".state")))
	})
	for _, p := range m {
		// The holder may react to the record's deletion (its watch pushes
		// the loss) and remove its own files before we get to them.
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// A grant whose files are deleted from outside ends at once for its holder
// (its watch shows its term with no holder, its Renew fails with ErrLost),
// the next grant has a higher term (the old store restarted at 1), and the
// new holder is told to wait out the old grant's TTL, which may have been
// renewed just before the deletion.
func TestGrantDeletedFromOutside(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const key, ttl = "deleted", time.Minute
	c, term := acquiringChild(t, dir, key, ttl)
	s := open(t, dir)
	ch := watchHeld(t, s, key, "child")

	removeKeyFiles(t, dir, key)
	// A leader's watch ends leadership on its own term with no holder; the
	// old store reported term 0, which says nothing about the grant.
	storetest.Await(t, ch, 5*time.Second, "the deletion", func(r tenure.Record) bool { return r.Term == term && !r.Held() })
	if got := mustGetRecord(t, s, key); got.Term != term || got.Held() {
		t.Fatalf("Get after the deletion = %+v, want free with term %d", got, term)
	}
	c.send("renew")
	if got := c.line(); got != "lost" {
		t.Fatalf("the holder's Renew after the deletion: %q, want lost", got)
	}

	// This process never saw the key before: the term comes from .terms.
	l := acquire(t, s, key, "beta", time.Second)
	if l.Term <= term {
		t.Fatalf("term after the deletion: %d, want above %d", l.Term, term)
	}
	if l.Wait < ttl {
		t.Fatalf("Wait after an unreleased grant's files were deleted: %s, want at least its TTL %s", l.Wait, ttl)
	}
	// A released grant's files deleted: no wait next time.
	if err := s.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	removeKeyFiles(t, dir, key)
	l2, err := s.Acquire(context.Background(), key, "beta", time.Second)
	if err != nil || l2.Term <= l.Term || l2.Wait != 0 {
		t.Fatalf("Acquire after a released grant's files were deleted = %+v, %v; want term above %d and no Wait", l2, err, l.Term)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mustGetRecord(t *testing.T, s *local.Store, key string) tenure.Record {
	t.Helper()
	r, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// With .terms deleted too, this process still never hands out a term that
// is not above one it has seen.
func TestEverythingDeletedTermsStillGrow(t *testing.T) {
	t.Parallel()
	const key = "wiped"
	dir, _, last := withHistory(t, key, 3)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	other := open(t, dir) // another handle of this process
	l := acquire(t, other, key, "beta", time.Minute)
	if l.Term <= last.Term {
		t.Fatalf("term after deleting every file: %d, want above %d", l.Term, last.Term)
	}
}

// A liveness file deleted while the record is unexpired: the key can be
// taken, but the holder may run until the record's expiry, so Wait covers
// it; the holder's Renew fails at once.
func TestLivenessFileDeleted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const key, ttl = "unlinked", time.Minute
	c, term := acquiringChild(t, dir, key, ttl)
	s := open(t, dir)
	holder := keyFile(dir, key, ".holder."+strconv.FormatUint(term, 10))
	if err := os.Remove(holder); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, s, key, "beta", time.Second)
	if l.Term <= term || l.Wait < ttl-10*time.Second || l.Wait > ttl+time.Second {
		t.Fatalf("Acquire after the liveness file was deleted = term %d wait %s; want term above %d and a wait of about the TTL left (%s)", l.Term, l.Wait, term, ttl)
	}
	c.send("renew")
	if got := c.line(); got != "lost" {
		t.Fatalf("the holder's Renew: %q, want lost", got)
	}
}

// A liveness file replaced by another file that somebody keeps locked (with
// flock and with an OFD lock) does not keep the grant alive for its holder:
// Renew compares the file it holds with the one in the directory, and the
// holder's own watch shows the grant gone.
func TestLivenessFileReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	const key = "replaced"
	l := acquire(t, s, key, "alpha", time.Minute)
	ch := watchHeld(t, s, key, "alpha")
	holder := keyFile(dir, key, ".holder."+strconv.FormatUint(l.Term, 10))
	if err := os.Remove(holder); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(holder, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &unix.Flock_t{Type: unix.F_WRLCK}); err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, 5*time.Second, "the replacement", func(r tenure.Record) bool { return !r.Held() })
	err = s.Renew(context.Background(), l)
	if !errors.Is(err, tenure.ErrLost) || !strings.Contains(err.Error(), holder) {
		t.Fatalf("Renew with a replaced liveness file: %v, want ErrLost naming %s", err, holder)
	}
}

// End to end with two electors: when the leader's files are deleted, the
// old leader's task ends before the new leader's task starts, and the new
// term is higher. (The old store let them overlap for about a second and
// restarted terms at 1.)
func TestElectorsDoNotOverlapAfterDeletion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const key, ttl = "overlap", 2 * time.Second
	type span struct {
		term       uint64
		start, end time.Time
	}
	var (
		mu      sync.Mutex
		spans   = map[string][]span{}
		started = make(chan string, 4)
	)
	task := func(id string) tenure.Task {
		return func(ctx context.Context) error {
			l, _ := tenure.LeaseFrom(ctx)
			term := l.Term
			mu.Lock()
			spans[id] = append(spans[id], span{term: term, start: time.Now()})
			mu.Unlock()
			started <- id
			<-ctx.Done()
			mu.Lock()
			spans[id][len(spans[id])-1].end = time.Now()
			mu.Unlock()
			return nil
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	run := func(id string) {
		e, err := tenure.New(tenure.Config{
			Store: open(t, dir), Key: key, Identity: id, TTL: ttl,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = e.Run(ctx, task(id)) }()
	}
	run("a")
	first := waitStarted(t, started, 10*time.Second)
	run("b")
	// Both are running; the follower is watching. Delete the grant.
	removeKeyFiles(t, dir, key)
	second := waitStarted(t, started, 10*time.Second)
	if second == first {
		t.Logf("%s was elected again", second)
	}
	mu.Lock()
	defer mu.Unlock()
	old, cur := spans[first][0], spans[second][len(spans[second])-1]
	if old.end.IsZero() || cur.start.Before(old.end) {
		t.Fatalf("two leaders: %s's term %d ran until %v, %s's term %d started at %v",
			first, old.term, old.end, second, cur.term, cur.start)
	}
	if cur.term <= old.term {
		t.Fatalf("term after the deletion: %d, want above %d", cur.term, old.term)
	}
	t.Logf("%s's term %d ended %s before %s's term %d started", first, old.term, cur.start.Sub(old.end), second, cur.term)
}

func waitStarted(t *testing.T, ch <-chan string, within time.Duration) string {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case id := <-ch:
		return id
	case <-timer.C:
		t.Fatalf("no leader within %s", within)
		return ""
	}
}

// A record overwritten from outside with an older copy (a backup restored,
// another tool writing the same name) ends the grant for its holder, and
// the next grant neither repeats a term (the old store handed out the
// holder's own term again) nor starts before the old holder can have
// noticed.
func TestRecordOverwrittenFromOutside(t *testing.T) {
	t.Parallel()
	const key, ttl = "restored", time.Minute
	dir, _, _ := withHistory(t, key, 1)
	backup := readFile(t, keyFile(dir, key, ".state"))
	c, term := acquiringChild(t, dir, key, ttl)
	writeFile(t, keyFile(dir, key, ".state"), backup)
	local.ForgetSeen(dir) // as another process would: only the files speak
	l := acquire(t, open(t, dir), key, "beta", time.Second)
	if l.Term <= term || l.Wait < ttl {
		t.Fatalf("Acquire after the record was overwritten = term %d wait %s; want a term above %d and a wait of at least %s", l.Term, l.Wait, term, ttl)
	}
	c.send("renew")
	if got := c.line(); got != "lost" {
		t.Fatalf("the old holder's Renew: %q, want lost", got)
	}
}

// An empty record, which a renewal's record can become after a power loss
// (it is swapped into place without being written out), reads as a
// deleted one: the key reads free, the next grant's term comes from
// .terms, above the holder's, after the holder's TTL, and the holder's
// Renew fails. An empty
// .terms record stays an error: it is the key's term high-water mark.
func TestEmptyRecordIsADeletedOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const key, ttl = "emptied", time.Minute
	c, term := acquiringChild(t, dir, key, ttl)
	c.send("renew") // the record is now a renewal's
	if got := c.line(); got != "renewed" {
		t.Fatalf("the holder's first Renew: %q", got)
	}
	s := open(t, dir)
	record := keyFile(dir, key, ".state")
	if err := os.Truncate(record, 0); err != nil {
		t.Fatal(err)
	}
	if got := mustGetRecord(t, s, key); got.Term != term || got.Held() {
		t.Fatalf("Get with an empty record = %+v, want free with term %d", got, term)
	}
	l := acquire(t, s, key, "beta", time.Second)
	if l.Term <= term || l.Wait < ttl {
		t.Fatalf("Acquire over an empty record = term %d, Wait %s; want above %d and at least %s", l.Term, l.Wait, term, ttl)
	}
	c.send("renew")
	if got := c.line(); got != "lost" {
		t.Fatalf("the holder's Renew after the empty record: %q, want lost", got)
	}
	if err := s.Release(context.Background(), l); err != nil {
		t.Fatal(err)
	}

	terms := filepath.Join(dir, local.TermsDir, local.BaseName(key)+".term")
	if err := os.Truncate(terms, 0); err != nil {
		t.Fatal(err)
	}
	local.ForgetSeen(dir)
	_, err := s.Acquire(context.Background(), key, "beta", time.Second)
	wantOneLine(t, "Acquire with an empty .terms record", err, local.ErrCorrupt, terms)
}
