package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/store/postgres"
	"github.com/tenurehq/tenure/storetest"
)

// sqlConn is a plain connection to the test server, as psql would be.
func sqlConn(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctxFor(t), server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// The invariant that makes a session safe: at every commit, each live
// grant of a session expires exactly when the session does, even while
// keep-alives race grants and releases in the session. (A keep-alive that
// missed a grant committed meanwhile would leave it expiring at the
// session's earlier end, before its holder's renew deadline.) No
// keep-alive may report a grant gone that was only released.
func TestSessionKeepAliveRacesAcquireAndRelease(t *testing.T) {
	table := randomName("sess_race_")
	st := openTable(t, table)
	ss := storetest.OpenSession(t, st, 5*time.Second)
	ctx, cancel := context.WithTimeout(ctxFor(t), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				l, err := ss.Acquire(ctx, fmt.Sprintf("k-%d-%d", w, i%40), "alpha", "")
				var held *tenure.HeldError
				switch {
				case errors.As(err, &held) || ctxerr.Err(ctx) != nil: // the deadline passed, maybe before ctx's timer fired
					continue
				case err != nil:
					errs <- fmt.Errorf("Acquire: %w", err)
					return
				}
				if i%3 == 0 {
					if err := ss.Release(ctx, l); err != nil && ctxerr.Err(ctx) == nil {
						errs <- fmt.Errorf("Release: %w", err)
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for ctx.Err() == nil {
			gone, err := ss.KeepAlive(ctx)
			if err != nil && ctxerr.Err(ctx) == nil {
				errs <- fmt.Errorf("KeepAlive: %w", err)
				return
			}
			if len(gone) > 0 {
				errs <- fmt.Errorf("KeepAlive reported %d grants gone, none was: %+v", len(gone), gone[0])
				return
			}
		}
	})
	conn := sqlConn(t)
	q := `SELECT count(*) FILTER (WHERE l.expires_at <> s.expires_at), count(*)
FROM ` + pgx.Identifier{table}.Sanitize() + ` l JOIN ` + pgx.Identifier{st.SessionsTable()}.Sanitize() + ` s ON s.id = l.session
WHERE l.session = $1 AND l.holder <> '' AND l.expires_at > now()`
	checks, maxLive := 0, int64(0)
	for ctx.Err() == nil {
		var bad, live int64
		if err := conn.QueryRow(ctxFor(t), q, postgres.SessionID(ss)).Scan(&bad, &live); err != nil {
			t.Fatal(err)
		}
		if bad != 0 {
			t.Fatalf("%d of %d live grants of the session expire apart from it", bad, live)
		}
		checks, maxLive = checks+1, max(maxLive, live)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if maxLive == 0 {
		t.Fatalf("no grant seen in %d checks", checks)
	}
}

// A grant rewritten from outside keeps the row's session column: the
// token tells the session's keep-alive it is not its grant any more. It
// is reported gone once, and keep-alives leave the new holder's expiry
// alone, as they do that of a holder who took the key after a release.
func TestSessionLeavesOtherHoldersAlone(t *testing.T) {
	table := randomName("sess_other_")
	st, b := openTable(t, table), openTable(t, table)
	ss := storetest.OpenSession(t, st, time.Minute)
	k1, k2, k3 := randomName("k"), randomName("k"), randomName("k")
	l1 := storetest.AcquireIn(t, ss, k1, "alpha", "")
	storetest.AcquireIn(t, ss, k2, "alpha", "")
	l3 := storetest.AcquireIn(t, ss, k3, "alpha", "")
	tamperOn(server(t), table).OverwriteGrant(t, k1, "mallory")
	if err := ss.Release(ctxFor(t), l3); err != nil {
		t.Fatal(err)
	}
	l3b, err := b.Acquire(ctxFor(t), k3, "beta", 400*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	gone := storetest.KeepAlive(t, ss)
	if len(gone) != 1 || gone[0].Key != k1 || gone[0].Term != l1.Term {
		t.Fatalf("KeepAlive after an overwrite reported gone %+v, want the grant of %q", gone, k1)
	}
	r1 := get(t, b, k1)
	for time.Since(before) < 600*time.Millisecond {
		if gone := storetest.KeepAlive(t, ss); len(gone) != 0 {
			t.Fatalf("gone reported again: %+v", gone)
		}
		time.Sleep(50 * time.Millisecond) // keep-alives over the other grant's TTL
	}
	if r := get(t, b, k1); r.Holder != "mallory" || r.Remaining >= r1.Remaining {
		t.Fatalf("the overwritten row after keep-alives: %+v, was %+v: the session moved its expiry", r, r1)
	}
	if r := get(t, b, k3); r.Held() {
		t.Fatalf("beta's grant of term %d (TTL 400ms) is still held after 600ms of the session's keep-alives: %+v", l3b.Term, r)
	}
	if r := get(t, b, k2); r.Holder != "alpha" {
		t.Fatalf("the session's own grant: %+v", r)
	}
}

// getAfterOutage is get after the server dropped the pool's connections:
// each fails its next call once (as without sessions; the session's
// keep-alives use a connection of their own).
func getAfterOutage(t *testing.T, st tenure.Store, key string) tenure.Record {
	t.Helper()
	for range 4 {
		if r, err := st.Get(ctxFor(t), key); err == nil {
			return r
		}
	}
	return get(t, st, key)
}

func get(t *testing.T, st tenure.Store, key string) tenure.Record {
	t.Helper()
	r, err := st.Get(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A watch sees a session grant end when the session expires, within the
// tolerance of the conformance suite, and not while keep-alives go on.
func TestSessionWatchSeesExpiry(t *testing.T) {
	table := randomName("sess_watch_")
	st, b := openTable(t, table), openTable(t, table)
	// 2 s: a keep-alive a third of the TTL after the last one ends must
	// start before the TTL is over, which at 1 s a loaded machine missed.
	const ttl = 2 * time.Second
	ss := storetest.OpenSession(t, st, ttl)
	l := storetest.AcquireIn(t, ss, randomName("k"), "alpha", "")
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	ch, err := b.Watch(ctx, l.Key)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Holder != "alpha" || r.Term != l.Term || r.TTL != ttl || r.Remaining <= 0 || r.Remaining > ttl {
		t.Fatalf("watch of a session grant: %+v", r)
	}
	for range 8 {
		time.Sleep(ttl / 3) // keep-alives at the usual pace
		storetest.KeepAlive(t, ss)
		select {
		case r := <-ch:
			if !r.Held() || r.Term != l.Term {
				t.Fatalf("the watch delivered %+v while the session lives", r)
			}
		default:
		}
	}
	last := time.Now()
	for {
		select {
		case r := <-ch:
			if r.Held() {
				continue
			}
			if late := time.Since(last) - ttl; late > 500*time.Millisecond {
				t.Fatalf("the watch saw the session's expiry %s late", late)
			}
			return
		case <-time.After(ttl + 2*time.Second):
			t.Fatal("the watch never saw the session's grant expire")
		}
	}
}

// The sessions table, its rows and the grants in them survive a restart of
// the server: the next keep-alives (the first may fail on a connection the
// restart broke) keep every grant, and terms go on.
func TestSessionSurvivesRestart(t *testing.T) {
	s := server(t)
	table := randomName("sess_restart_")
	st := openTable(t, table)
	ss := storetest.OpenSession(t, st, time.Minute)
	l1 := storetest.AcquireIn(t, ss, randomName("k"), "alpha", "")
	l2 := storetest.AcquireIn(t, ss, randomName("k"), "alpha", "")
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	var err error
	for range 3 {
		var gone []tenure.Lease
		if gone, err = ss.KeepAlive(ctxFor(t)); err == nil {
			if len(gone) != 0 {
				t.Fatalf("KeepAlive after a restart reported gone %+v", gone)
			}
			break
		}
		if errors.Is(err, tenure.ErrLost) {
			t.Fatalf("KeepAlive after a restart: %v", err)
		}
	}
	if err != nil {
		t.Fatalf("KeepAlive after a restart, three times: %v", err)
	}
	for _, l := range []tenure.Lease{l1, l2} {
		if r := getAfterOutage(t, st, l.Key); r.Holder != "alpha" || r.Term != l.Term {
			t.Fatalf("after the restart: %+v", r)
		}
	}
	if err := ss.Release(ctxFor(t), l1); err != nil {
		t.Fatal(err)
	}
	if l := storetest.AcquireIn(t, ss, l1.Key, "alpha", ""); l.Term <= l1.Term {
		t.Fatalf("term %d after the restart, not above %d", l.Term, l1.Term)
	}
}

// The server drops every connection of the store (a proxy or a
// pg_terminate_backend): the keep-alive at worst fails without ErrLost,
// and the next one keeps every grant.
func TestSessionConnectionLoss(t *testing.T) {
	table := randomName("sess_conn_")
	st := openTable(t, table)
	ss := storetest.OpenSession(t, st, time.Minute)
	l := storetest.AcquireIn(t, ss, randomName("k"), "alpha", "")
	storetest.KeepAlive(t, ss) // the session's own connection is up
	conn := sqlConn(t)
	var dropped int
	if err := conn.QueryRow(ctxFor(t), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND datname = current_database()
	AND query LIKE '%'||$1||'%'`, table).Scan(&dropped); err != nil || dropped == 0 {
		t.Fatalf("dropping the store's connections: %d dropped, %v", dropped, err)
	}
	if _, err := ss.KeepAlive(ctxFor(t)); errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive after the connections were dropped: %v", err)
	}
	if gone := storetest.KeepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("gone after a connection loss: %+v", gone)
	}
	if r := getAfterOutage(t, st, l.Key); r.Holder != "alpha" || r.Term != l.Term {
		t.Fatalf("after the connection loss: %+v", r)
	}
}

// A session's calls after its Close, or after the store's Close, fail as
// the contract says; Acquire in a closed session grants nothing.
func TestSessionAfterClose(t *testing.T) {
	table := randomName("sess_close_")
	st, b := openTable(t, table), openTable(t, table)
	ss := storetest.OpenSession(t, st, time.Minute)
	if err := ss.Close(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	key := randomName("k")
	if _, err := ss.Acquire(ctxFor(t), key, "alpha", ""); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Acquire after Close: %v, want ErrLost", err)
	}
	if r := get(t, b, key); r.Held() {
		t.Fatalf("a closed session granted %+v", r)
	}
	if _, err := ss.KeepAlive(ctxFor(t)); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive after Close: %v, want ErrLost", err)
	}
	// Another handle of the same session id cannot exist; a second
	// session, its store closed, says ErrClosed.
	ss2 := storetest.OpenSession(t, b, time.Minute)
	storetest.KeepAlive(t, ss2)
	if n := sessionConns(t, table); n != 1 {
		t.Fatalf("%d connections keep the session alive, want 1", n)
	}
	_ = b.Close()
	if _, err := ss2.KeepAlive(ctxFor(t)); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("KeepAlive after the store's Close: %v, want ErrClosed", err)
	}
	// The store's Close let the session's own connection go.
	deadline := time.Now().Add(5 * time.Second)
	for sessionConns(t, table) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the session's connection outlived its store")
		}
		time.Sleep(20 * time.Millisecond) // the server notices the closed socket on its own time
	}
	if _, err := st.OpenSession(ctxFor(t), 0); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("OpenSession(0): %v, want ErrInvalid", err)
	}
}

// sessionConns counts the server's connections whose last statement was
// a keep-alive on table's sessions (the session's own connection).
func sessionConns(t *testing.T, table string) int {
	t.Helper()
	var n int
	err := sqlConn(t).QueryRow(ctxFor(t), `SELECT count(*) FROM pg_stat_activity
WHERE pid <> pg_backend_pid() AND backend_type = 'client backend' AND query LIKE 'UPDATE %' || $1 || '_sessions%'`, table).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A lease table made before sessions (no session column) gains what
// sessions need on the first OpenSession, and its rows keep their terms.
func TestSessionOnOldTable(t *testing.T) {
	table := randomName("sess_old_")
	conn := sqlConn(t)
	_, err := conn.Exec(ctxFor(t), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (
	key        text PRIMARY KEY,
	holder     text NOT NULL DEFAULT '',
	term       bigint NOT NULL CHECK (term > 0),
	token      text NOT NULL DEFAULT '',
	ttl_ns     bigint NOT NULL DEFAULT 0,
	expires_at timestamptz,
	value      text NOT NULL DEFAULT ''
);
INSERT INTO `+pgx.Identifier{table}.Sanitize()+` (key, term) VALUES ('job', 41)`)
	if err != nil {
		t.Fatal(err)
	}
	st := openTable(t, table)
	ss := storetest.OpenSession(t, st, time.Minute)
	if l := storetest.AcquireIn(t, ss, "job", "alpha", ""); l.Term != 42 {
		t.Fatalf("term %d, want 42 after the old row's 41", l.Term)
	}
}

// Names derived from a long table name stay identifiers PostgreSQL keeps
// whole, and differ for tables that differ only past the cut.
func TestDerivedNames(t *testing.T) {
	long := strings.Repeat("a", 60)
	a, b := postgres.DerivedName(long+"bc", "_sessions"), postgres.DerivedName(long+"bd", "_sessions")
	if len(a) > 63 || len(b) > 63 || a == b || !strings.HasSuffix(a, "_sessions") {
		t.Fatalf("derived names %q and %q", a, b)
	}
	if n := postgres.DerivedName("leases", "_sessions"); n != "leases_sessions" {
		t.Fatalf("short name derived as %q", n)
	}
}

// Two processes lead keys through a tenure.Session each. The first
// crashes (its store closes without releasing anything): every key fails
// over to the second within about a TTL, and no task of the second starts
// before the first's task for that key was cancelled.
func TestSessionElectorsFailOver(t *testing.T) {
	const keys, ttl = 20, 2 * time.Second
	table := randomName("sess_fail_")
	quiet := slog.New(slog.DiscardHandler)
	var mu sync.Mutex
	ended := map[string]time.Time{} // when the first process's task for a key ended
	var overlaps []string
	run := func(st *postgres.Store, first bool, led chan<- string) (stop func()) {
		sess, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: ttl, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for i := range keys {
			key := fmt.Sprintf("shard-%d", i)
			e, err := tenure.New(tenure.Config{Store: st, Session: sess, TTL: ttl, Key: key, Identity: fmt.Sprint(first), Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				_ = e.Run(ctx, func(ctx context.Context) error {
					mu.Lock()
					if end, ok := ended[key]; !first && (!ok || time.Now().Before(end)) {
						overlaps = append(overlaps, key)
					}
					mu.Unlock()
					led <- key
					<-ctx.Done()
					if first {
						mu.Lock()
						ended[key] = time.Now()
						mu.Unlock()
					}
					return nil
				})
			})
		}
		return func() {
			cancel()
			wg.Wait()
			_ = sess.Close(context.Background())
		}
	}
	a, b := openTable(t, table), openTable(t, table)
	ledA, ledB := make(chan string, keys), make(chan string, keys)
	stopA := run(a, true, ledA)
	defer stopA()
	for range keys {
		<-ledA
	}
	stopB := run(b, false, ledB)
	defer stopB()
	time.Sleep(ttl) // the second process campaigns, watching every key
	crash := time.Now()
	_ = a.Close()
	for i := range keys {
		select {
		case <-ledB:
		case <-time.After(ttl + 3*time.Second):
			t.Fatalf("%d of %d keys failed over within %s of the crash", i, keys, time.Since(crash))
		}
	}
	took := time.Since(crash)
	t.Logf("%d keys failed over in %s (TTL %s)", keys, took, ttl)
	if took > ttl+time.Second {
		t.Errorf("failover took %s, more than the TTL %s and a second", took, ttl)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Fatalf("the second process led %v before the first's task ended", overlaps)
	}
}

// A grant made by an Acquire whose reply never came (here: its context
// ended while the statement waited for a lock, which the server then got
// and committed) is unknown to its caller. Keep-alives must not keep it
// for the session's whole life, holding the key from everybody: the next
// one releases it.
func TestSessionReleasesGrantsInDoubt(t *testing.T) {
	table := randomName("sess_doubt_")
	st, b := openTable(t, table), openTable(t, table)
	ss := storetest.OpenSession(t, st, time.Minute)
	key := randomName("k")
	conn := sqlConn(t)
	tx, err := conn.Begin(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctxFor(t), `SELECT 1 FROM `+pgx.Identifier{st.SessionsTable()}.Sanitize()+` WHERE id = $1 FOR UPDATE`,
		postgres.SessionID(ss)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxFor(t), 300*time.Millisecond)
	defer cancel()
	if _, err := ss.Acquire(ctx, key, "alpha", ""); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire blocked behind the lock: %v, want a deadline error", err)
	}
	if err := tx.Commit(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !get(t, b, key).Held() {
		if time.Now().After(deadline) {
			t.Skip("the server did not commit the abandoned Acquire: nothing in doubt to release")
		}
		time.Sleep(20 * time.Millisecond) // the abandoned statement commits on its own time
	}
	if gone := storetest.KeepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive reported %+v gone: the caller never had it", gone)
	}
	if r := get(t, b, key); r.Held() {
		t.Fatalf("the grant in doubt survived a keep-alive: %+v", r)
	}
	if l := storetest.AcquireIn(t, ss, key, "alpha", ""); l.Wait != 0 {
		t.Fatalf("the next grant waits %s for a grant nobody had", l.Wait)
	}
}
