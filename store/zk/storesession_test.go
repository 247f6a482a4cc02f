package zk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/zk"
)

// openSess opens a session of st for ttl, closed at the end of the test.
func openSess(t *testing.T, st *zk.Store, ttl time.Duration) tenure.StoreSession {
	t.Helper()
	ss, err := st.OpenSession(ctxT(t, 30*time.Second), ttl)
	if err != nil {
		t.Fatalf("OpenSession(%s): %v", ttl, err)
	}
	t.Cleanup(func() { _ = ss.Close(context.Background()) })
	return ss
}

func keepAlive(t *testing.T, ss tenure.StoreSession) []tenure.Lease {
	t.Helper()
	gone, err := ss.KeepAlive(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	return gone
}

// TestSessionKeepAliveWithoutGrants checks that a session kept alive before
// its first grant, under a path that does not exist yet, works.
func TestSessionKeepAliveWithoutGrants(t *testing.T) {
	srv := server(t)
	st := open(t, "zk://"+srv.Addr+"/fresh-"+fmt.Sprint(time.Now().UnixNano()))
	ss := openSess(t, st, 2*time.Second)
	if gone := keepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive of an empty session reported gone: %+v", gone)
	}
	l, err := ss.Acquire(ctxT(t, 10*time.Second), "k", "alpha", "")
	if err != nil {
		t.Fatal(err)
	}
	if gone := keepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive reported gone: %+v (grant %+v)", gone, l)
	}
}

// TestSessionBadTTLAndClosedStore checks a TTL the server cannot honour,
// and the errors after the store's Close.
func TestSessionBadTTLAndClosedStore(t *testing.T) {
	srv := server(t)
	st := open(t, "zk://"+srv.Addr+"/sessbad")
	ctx := ctxT(t, 30*time.Second)
	if _, err := st.OpenSession(ctx, 2*time.Minute); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("OpenSession above maxSessionTimeout: %v, want ErrInvalid", err)
	}
	if _, err := st.OpenSession(ctx, 0); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("OpenSession(0): %v, want ErrInvalid", err)
	}
	ss := openSess(t, st, 2*time.Second)
	l, err := ss.Acquire(ctx, "k", "alpha", "")
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := ss.KeepAlive(ctx); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("KeepAlive after the store closed: %v, want ErrClosed", err)
	}
	if _, err := ss.Acquire(ctx, "k2", "alpha", ""); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Acquire after the store closed: %v, want ErrClosed", err)
	}
	if err := ss.Release(ctx, l); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Release after the store closed: %v, want ErrClosed", err)
	}
	if _, err := st.OpenSession(ctx, time.Second); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("OpenSession after the store closed: %v, want ErrClosed", err)
	}
	// The store's Close closed the session: the key is free at once.
	b := open(t, "zk://"+srv.Addr+"/sessbad")
	if _, err := b.Acquire(ctx, "k", "beta", time.Second); err != nil {
		t.Fatalf("Acquire after the session's store closed: %v", err)
	}
}

// TestSessionOverwrittenOrDeletedFromOutside checks that every way of
// taking a grant away from outside is reported by the next keep-alive, and
// that the session can take the key again afterwards.
func TestSessionOverwrittenOrDeletedFromOutside(t *testing.T) {
	tm, st := tamperedStore(t, "/sesstamper")
	ss := openSess(t, st, 5*time.Second)
	ctx := ctxT(t, 30*time.Second)
	leases := acquireAll(ctx, t, ss, "deleted", "overwritten", "all-deleted", "kept")
	tm.DeleteGrant(t, "deleted")
	tm.OverwriteGrant(t, "overwritten", "mallory")
	tm.DeleteAll(t, "all-deleted")
	gone := keepAlive(t, ss)
	got := goneKeys(t, gone, leases)
	if len(gone) != 3 || !got["deleted"] || !got["overwritten"] || !got["all-deleted"] {
		t.Fatalf("KeepAlive reported gone %+v, want the three keys taken away", gone)
	}
	if err := ss.Release(ctx, leases["deleted"]); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Release of a grant reported gone: %v, want ErrLost", err)
	}
	// The session takes the deleted key again (its old marker is gone or
	// taken back), with a term above the old one.
	l, err := ss.Acquire(ctx, "deleted", "alpha", "")
	if err != nil {
		t.Fatalf("Acquire again in the same session: %v", err)
	}
	if l.Term <= leases["deleted"].Term {
		t.Fatalf("term went from %d to %d", leases["deleted"].Term, l.Term)
	}
	if gone := keepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive after taking the key again reported gone: %+v", gone)
	}
}

// goneKeys returns the keys of gone, the leases a KeepAlive reported gone,
// checking that each is the very grant leases has for its key.
// acquireAll acquires keys in ss as alpha and returns the grants by key.
func acquireAll(ctx context.Context, t *testing.T, ss tenure.StoreSession, keys ...string) map[string]tenure.Lease {
	t.Helper()
	leases := map[string]tenure.Lease{}
	for _, k := range keys {
		l, err := ss.Acquire(ctx, k, "alpha", "")
		if err != nil {
			t.Fatal(err)
		}
		leases[k] = l
	}
	return leases
}

// acquireBatch acquires keys in one AcquireBatch of ss as identity and
// returns the grants by key.
func acquireBatch(ctx context.Context, t *testing.T, ss tenure.StoreSession, identity string, keys []string) map[string]tenure.Lease {
	t.Helper()
	var reqs []tenure.AcquireRequest
	for _, k := range keys {
		reqs = append(reqs, tenure.AcquireRequest{Key: k, Identity: identity})
	}
	leases := map[string]tenure.Lease{}
	for i, r := range ss.(tenure.BatchAcquirer).AcquireBatch(ctx, reqs) {
		if r.Err != nil {
			t.Fatalf("AcquireBatch %s: %v", keys[i], r.Err)
		}
		leases[keys[i]] = r.Lease
	}
	return leases
}

func goneKeys(t *testing.T, gone []tenure.Lease, leases map[string]tenure.Lease) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for _, l := range gone {
		if l != leases[l.Key] {
			t.Errorf("gone lease %+v is not the grant %+v", l, leases[l.Key])
		}
		got[l.Key] = true
	}
	return got
}

// grantedBefore grants keys once to a session of their own, then closes
// it: a batch makes grants of keys granted before in one multi-operation
// (new keys go on their own).
func grantedBefore(ctx context.Context, t *testing.T, st *zk.Store, keys []string) {
	t.Helper()
	first := openSess(t, st, 5*time.Second)
	acquireAll(ctx, t, first, keys...)
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSessionBatchTakenBeforeWatched checks that grants a batch returned
// before their watches were set, and that were deleted or overwritten from
// outside in between, are reported gone by the next keep-alive, which
// waits for those watches; the grant left alone is not.
func TestSessionBatchTakenBeforeWatched(t *testing.T) {
	tm, st := tamperedStore(t, "/sessbatchwatch")
	ctx := ctxT(t, 30*time.Second)
	keys := []string{"deleted", "overwritten", "kept"}
	grantedBefore(ctx, t, st, keys)
	ss := openSess(t, st, 5*time.Second)
	tampered := make(chan struct{})
	var once sync.Once
	restore := zk.BeforeBatchWatches(func(func()) {
		once.Do(func() {
			tm.DeleteGrant(t, "deleted")
			tm.OverwriteGrant(t, "overwritten", "mallory")
			close(tampered)
			// Long enough for a keep-alive that did not wait for the
			// watches to be answered before they are set.
			time.Sleep(500 * time.Millisecond)
		})
	})
	defer restore()
	leases := acquireBatch(ctx, t, ss, "alpha", keys)
	select {
	case <-tampered:
	case <-ctx.Done():
		t.Fatal("the batch's watches were never set")
	}
	gone := keepAlive(t, ss)
	got := goneKeys(t, gone, leases)
	if len(gone) != 2 || !got["deleted"] || !got["overwritten"] {
		t.Fatalf("KeepAlive reported gone %+v, want the two keys taken away before their watches were set", gone)
	}
	if err := ss.Release(ctx, leases["kept"]); err != nil {
		t.Fatalf("Release of the grant left alone: %v", err)
	}
}

// TestSessionBatchGrantsUnwatched checks that grants a batch returned and
// whose watches then could not be set are reported gone by the next
// keep-alive, and that nobody else gets their keys before: their holders
// may lead until told. Then they are given back.
func TestSessionBatchGrantsUnwatched(t *testing.T) {
	srv := server(t)
	st := open(t, "zk://"+srv.Addr+"/sessbatchunwatched")
	ctx := ctxT(t, 30*time.Second)
	keys := []string{"a", "b"}
	grantedBefore(ctx, t, st, keys)
	ss := openSess(t, st, 5*time.Second)
	failed := make(chan struct{})
	var once sync.Once
	restore := zk.BeforeBatchWatches(func(fail func()) {
		once.Do(func() {
			fail()
			close(failed)
		})
	})
	defer restore()
	leases := acquireBatch(ctx, t, ss, "beta", keys)
	<-failed
	other := openSess(t, st, 5*time.Second)
	for _, k := range keys {
		var held *tenure.HeldError
		if _, err := other.Acquire(ctx, k, "gamma", ""); !errors.As(err, &held) || held.Record.Holder != "beta" {
			t.Fatalf("Acquire of %s by another session before the holder was told: %v, want held by beta", k, err)
		}
	}
	// Taken before the KeepAlive that reports the grants: the session TTL
	// they are kept for runs from inside it, so a time taken after it
	// returned could make a full TTL look short.
	reported := time.Now()
	gone := keepAlive(t, ss)
	if len(gone) != 2 || gone[0] != leases[gone[0].Key] || gone[1] != leases[gone[1].Key] || gone[0].Key == gone[1].Key {
		t.Fatalf("KeepAlive reported gone %+v, want both unwatched grants %+v", gone, leases)
	}
	for _, k := range keys { // held on until the holder can have stopped
		var held *tenure.HeldError
		if _, err := other.Acquire(ctx, k, "gamma", ""); !errors.As(err, &held) && time.Since(reported) < 4*time.Second {
			t.Fatalf("Acquire of %s by another session right after the holder was told: %v, want held until a session TTL passed", k, err)
		}
	}
	for _, k := range keys { // given back one session TTL after it was reported
		deadline := time.Now().Add(15 * time.Second)
		for {
			l, err := other.Acquire(ctx, k, "gamma", "")
			if err == nil {
				if l.Term <= leases[k].Term {
					t.Fatalf("%s granted at term %d after term %d", k, l.Term, leases[k].Term)
				}
				if d := time.Since(reported); d < 5*time.Second {
					t.Fatalf("%s given to another session %s after its holder was told, before the session TTL of 5s", k, d)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not given back after it was reported gone: %v", k, err)
			}
			// Both sessions live on: the key must come back through the
			// reported grant's deletion, not its session's end.
			keepAlive(t, ss)
			keepAlive(t, other)
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// TestSessionBatchStaleWatchedNode checks that a batch that takes a key
// node from a candidate's watch instead of reading it (see Store.fresh)
// grants nothing on a stale one: a key held meanwhile stays its holder's,
// and a key rewritten meanwhile is granted at a term above the rewrite.
func TestSessionBatchStaleWatchedNode(t *testing.T) {
	srv := server(t)
	root := "/sessbatchstale"
	st := open(t, "zk://"+srv.Addr+root)
	ctx := ctxT(t, 30*time.Second)
	keys := []string{"held", "rewritten"}
	first := openSess(t, st, 5*time.Second)
	leases := acquireAll(ctx, t, first, keys...)
	if err := first.Release(ctx, leases["rewritten"]); err != nil {
		t.Fatal(err)
	}
	raw := rawConn(t, srv)
	for _, k := range keys {
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		if _, err := st.Watch(wctx, k); err != nil {
			t.Fatal(err)
		}
		if !zk.StaleWatched(st, k) {
			t.Fatalf("no watched node noted for %s", k)
		}
	}
	ss := openSess(t, st, 5*time.Second)
	reqs := []tenure.AcquireRequest{{Key: "held", Identity: "beta"}, {Key: "rewritten", Identity: "beta"}}
	res := ss.(tenure.BatchAcquirer).AcquireBatch(ctx, reqs)
	var held *tenure.HeldError
	if !errors.As(res[0].Err, &held) || held.Record.Holder != "alpha" {
		t.Fatalf("batch on a stale node of a held key: %+v, want held by alpha", res[0])
	}
	_, kst, err := raw.Get(zk.KeyPath(root, "rewritten"))
	if err != nil {
		t.Fatal(err)
	}
	if res[1].Err != nil || res[1].Lease.Term != uint64(kst.Mzxid) || res[1].Lease.Term <= leases["rewritten"].Term {
		t.Fatalf("batch on a stale node of a free key: %+v, want a grant at the key node's term %d", res[1], kst.Mzxid)
	}
	if gone := keepAlive(t, first); len(gone) != 0 {
		t.Fatalf("the holder's KeepAlive reported gone %+v", gone)
	}
}

// TestSessionRetakesOwnDeletedGrant checks that a session whose grant was
// deleted from outside can take the key again before a keep-alive told it,
// that the new grant waits for the old one's window, and that the old
// grant is still reported gone.
func TestSessionRetakesOwnDeletedGrant(t *testing.T) {
	tm, st := tamperedStore(t, "/sessretake")
	ss := openSess(t, st, 3*time.Second)
	ctx := ctxT(t, 30*time.Second)
	old, err := ss.Acquire(ctx, "k", "alpha", "")
	if err != nil {
		t.Fatal(err)
	}
	tm.DeleteGrant(t, "k")
	l, err := ss.Acquire(ctx, "k", "alpha", "")
	if err != nil {
		t.Fatalf("Acquire again before a keep-alive: %v", err)
	}
	if l.Term <= old.Term || l.Wait < old.TTL || l.Wait > old.TTL+time.Second {
		t.Fatalf("the new grant has term %d wait %s, want a term above %d and a wait of about %s", l.Term, l.Wait, old.Term, old.TTL)
	}
	gone := keepAlive(t, ss)
	if len(gone) != 1 || gone[0] != old {
		t.Fatalf("KeepAlive reported gone %+v, want just the old grant %+v", gone, old)
	}
	if err := ss.Release(ctx, l); err != nil {
		t.Fatalf("Release of the new grant: %v", err)
	}
}

// TestSessionKeepAliveRacesRelease releases grants while keep-alives run:
// no released grant is reported gone, and nothing fails.
func TestSessionKeepAliveRacesRelease(t *testing.T) {
	srv := server(t)
	st := open(t, "zk://"+srv.Addr+"/sessrace")
	ss := openSess(t, st, 5*time.Second)
	ctx := ctxT(t, 60*time.Second)
	const n = 100
	leases := make([]tenure.Lease, n)
	for i := range leases {
		l, err := ss.Acquire(ctx, fmt.Sprintf("k%d", i), "alpha", "")
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, n+1)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			gone, err := ss.KeepAlive(ctx)
			if err != nil || len(gone) != 0 {
				errs <- fmt.Errorf("KeepAlive during releases: gone %+v, err %v", gone, err)
				return
			}
		}
	})
	var rel sync.WaitGroup
	for _, l := range leases {
		rel.Go(func() {
			if err := ss.Release(ctx, l); err != nil {
				errs <- fmt.Errorf("Release(%q): %v", l.Key, err)
			}
		})
	}
	rel.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if gone := keepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive after the releases reported gone: %+v", gone)
	}
	b := open(t, "zk://"+srv.Addr+"/sessrace")
	for _, l := range leases[:3] {
		if _, err := b.Acquire(ctx, l.Key, "beta", time.Second); err != nil {
			t.Fatalf("Acquire of a released key: %v", err)
		}
	}
}

// TestSessionCutOff cuts a session's connections as a crash or a partition
// would: ZooKeeper expires it, freeing its keys within the TTL (and a tick)
// of its last keep-alive, and the session's KeepAlive then reports it lost.
func TestSessionCutOff(t *testing.T) {
	srv := server(t)
	a := open(t, "zk://"+srv.Addr+"/sesscut")
	b := open(t, "zk://"+srv.Addr+"/sesscut")
	const ttl = 2 * time.Second
	ss := openSess(t, a, ttl)
	ctx := ctxT(t, 30*time.Second)
	l, err := ss.Acquire(ctx, "k", "alpha", "")
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	keepAlive(t, ss)
	zk.CrashSession(ss)
	for {
		l2, err := b.Acquire(ctx, "k", "beta", time.Second)
		if err == nil {
			if l2.Term <= l.Term || l2.Wait != 0 {
				t.Fatalf("the grant after the session expired: term %d wait %s, want a term above %d and no wait", l2.Term, l2.Wait, l.Term)
			}
			break
		}
		if !errors.Is(err, tenure.ErrHeld) {
			t.Fatal(err)
		}
		if time.Since(sent) > ttl+time.Second {
			t.Fatalf("the key of a cut-off session is still held %s after its last keep-alive", time.Since(sent))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if time.Since(sent) < ttl-testserver.ZKTickTime {
		t.Fatalf("the key of a cut-off session was free after %s, before its TTL %s", time.Since(sent), ttl)
	}
	kctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := ss.KeepAlive(kctx); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive of the expired session: %v, want ErrLost", err)
	}
}

// TestSessionServerRestart stops the server under two sessions: the one
// whose TTL outlasts the outage lives on with its grants once the server is
// back; the other is ended by the store when its TTL passes without a
// keep-alive, and ZooKeeper frees its keys after the restart.
func TestSessionServerRestart(t *testing.T) {
	srv := server(t)
	a := open(t, "zk://"+srv.Addr+"/sessrestart")
	b := open(t, "zk://"+srv.Addr+"/sessrestart")
	ctx := ctxT(t, 90*time.Second)
	long, short := openSess(t, a, 40*time.Second), openSess(t, a, 2*time.Second)
	ll, err := long.Acquire(ctx, "long", "alpha", "")
	if err != nil {
		t.Fatal(err)
	}
	ls, err := short.Acquire(ctx, "short", "alpha", "")
	if err != nil {
		t.Fatal(err)
	}
	keepAlive(t, short)
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	for {
		kctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_, err := short.KeepAlive(kctx)
		cancel()
		if errors.Is(err, tenure.ErrLost) {
			break
		}
		if err == nil {
			t.Fatal("KeepAlive succeeded with the server down")
		}
		if ctx.Err() != nil {
			t.Fatalf("the short session did not end while the server was down: %v", err)
		}
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for {
		kctx, cancel := context.WithTimeout(ctx, time.Second)
		gone, err := long.KeepAlive(kctx)
		cancel()
		if err == nil {
			if len(gone) != 0 {
				t.Fatalf("KeepAlive after the restart reported gone: %+v", gone)
			}
			break
		}
		if errors.Is(err, tenure.ErrLost) || ctx.Err() != nil {
			t.Fatalf("the long session did not survive the restart: %v", err)
		}
	}
	if r, err := b.Get(ctx, "long"); err != nil || r.Holder != "alpha" || r.Term != ll.Term {
		t.Fatalf("the long session's grant after the restart: %+v, %v", r, err)
	}
	for {
		l2, err := b.Acquire(ctx, "short", "beta", time.Second)
		if err == nil {
			if l2.Term <= ls.Term {
				t.Fatalf("term went from %d to %d", ls.Term, l2.Term)
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the ended session's key was never freed: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSessionReleaseWithoutMarker checks that a grant whose marker node was
// deleted from outside is still released, rather than left in place.
func TestSessionReleaseWithoutMarker(t *testing.T) {
	srv := server(t)
	raw := rawConn(t, srv)
	st := open(t, "zk://"+srv.Addr+"/sessmarker")
	ss := openSess(t, st, 5*time.Second)
	ctx := ctxT(t, 30*time.Second)
	l, err := ss.Acquire(ctx, "k", "alpha", "")
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("%s.s%x", zk.KeyPath("/sessmarker", "k"), uint64(zk.SessionID(ss)))
	if err := raw.Delete(marker, -1); err != nil {
		t.Fatalf("delete the marker %s: %v", marker, err)
	}
	if err := ss.Release(ctx, l); err != nil {
		t.Fatalf("Release without a marker: %v", err)
	}
	if r, err := st.Get(ctx, "k"); err != nil || r.Held() {
		t.Fatalf("after the release: %+v, %v", r, err)
	}
}

// TestSessionGoneWhileDisconnected takes a grant away while the session's
// connection is down: the first KeepAlive that succeeds after the client
// reconnected reports it.
func TestSessionGoneWhileDisconnected(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector reports a race inside go-zookeeper/zk when a connection with many watches comes back; .ci/run runs this test without -race")
	}
	tm, st := tamperedStore(t, "/sessdisc")
	ss := openSess(t, st, 10*time.Second)
	ctx := ctxT(t, 30*time.Second)
	var leases []tenure.Lease
	for i := range 50 {
		l, err := ss.Acquire(ctx, fmt.Sprint("k", i), "alpha", "")
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	keepAlive(t, ss)
	resume := zk.PauseSession(ss)
	tm.DeleteGrant(t, "k7")
	tm.OverwriteGrant(t, "k9", "mallory")
	kctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err := ss.KeepAlive(kctx)
	cancel()
	if err == nil || errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive while disconnected: %v, want a transient error", err)
	}
	resume()
	for {
		kctx, cancel := context.WithTimeout(ctx, time.Second)
		gone, err := ss.KeepAlive(kctx)
		cancel()
		if err != nil {
			if errors.Is(err, tenure.ErrLost) || ctx.Err() != nil {
				t.Fatalf("KeepAlive after the reconnection: %v", err)
			}
			continue
		}
		if len(gone) != 2 || gone[0].Key == gone[1].Key || gone[0] != leases[7] && gone[0] != leases[9] ||
			gone[1] != leases[7] && gone[1] != leases[9] {
			t.Fatalf("the first KeepAlive after the reconnection reported gone %+v, want k7 and k9", gone)
		}
		break
	}
	if gone := keepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("the next KeepAlive reported gone %+v", gone)
	}
}

// TestSessionLostAnswer checks what follows an Acquire whose answer was
// lost after ZooKeeper made the grant: the next Acquire of the key in the
// session takes the grant up (without a wait, the key having been free),
// and otherwise the session deletes it in the background.
func TestSessionLostAnswer(t *testing.T) {
	srv := server(t)
	st := open(t, "zk://"+srv.Addr+"/sesslost")
	b := open(t, "zk://"+srv.Addr+"/sesslost")
	ss := openSess(t, st, 5*time.Second)
	ctx := ctxT(t, 30*time.Second)
	if err := zk.GrantUntracked(ctx, ss, "adopted", "alpha", false); err != nil {
		t.Fatal(err)
	}
	l, err := ss.Acquire(ctx, "adopted", "alpha", "")
	if err != nil {
		t.Fatalf("Acquire of the session's untracked grant: %v", err)
	}
	if r := mustRecord(t, b, "adopted"); r.Holder != "alpha" || r.Term != l.Term || l.Wait != 0 {
		t.Fatalf("adopted lease %+v, record %+v: want the record's term and no wait", l, r)
	}
	if gone := keepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive reported gone %+v", gone)
	}
	if err := ss.Release(ctx, l); err != nil {
		t.Fatalf("Release of the adopted grant: %v", err)
	}
	if err := zk.GrantUntracked(ctx, ss, "undone", "alpha", true); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := b.Acquire(ctx, "undone", "beta", time.Second)
		if err == nil {
			break
		}
		if !errors.Is(err, tenure.ErrHeld) || ctx.Err() != nil {
			t.Fatalf("the untracked grant was not undone: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func mustRecord(t *testing.T, st *zk.Store, key string) tenure.Record {
	t.Helper()
	r, err := st.Get(ctxT(t, 10*time.Second), key)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// received is the number of packets the server received so far, from its
// "srvr" four-letter word.
func received(t *testing.T, srv *testserver.ZKServer) int {
	t.Helper()
	c, err := net.DialTimeout("tcp", srv.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("srvr")); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Received: (\d+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("srvr answered %q", out)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestSessionBatchAfterEndedSession checks what a batch costs when the
// keys' last holder's session has ended, as when a crashed process's keys
// move: a read per key, one multi-operation, and the two watch-setting
// reads per grant (measured by the server's own count, with the
// keep-alive that waits for those watches), not a read per key more to
// ask whether the last holder's session lives. Its grants do not wait.
// A key whose lease node was deleted from outside while its holder's
// session lives still waits for that grant's TTL, also in a batch with
// others.
func TestSessionBatchAfterEndedSession(t *testing.T) {
	tm, st := tamperedStore(t, "/sessbatchended")
	srv := server(t)
	ctx := ctxT(t, 60*time.Second)
	const n = 50
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	grantedBefore(ctx, t, st, keys)
	ss := openSess(t, st, 5*time.Second)
	before := received(t, srv)
	leases := acquireBatch(ctx, t, ss, "beta", keys)
	keepAlive(t, ss)
	// 3n+2 requests, and some room for pings: a read per key more is 4n+2.
	if got := received(t, srv) - before; got > 3*n+2+n/2 {
		t.Fatalf("a batch of %d keys whose last session ended, with a keep-alive, cost the server %d packets, want about %d", n, got, 3*n+2)
	}
	for _, k := range keys {
		if leases[k].Wait != 0 {
			t.Fatalf("%s: the grant after an ended session waits %s, want no wait", k, leases[k].Wait)
		}
	}
	live := openSess(t, st, 4*time.Second)
	held := acquireBatch(ctx, t, live, "gamma", []string{"tampered"})["tampered"]
	tm.DeleteGrant(t, "tampered") // its marker stays: the session lives on
	grantedBefore(ctx, t, st, []string{"free"})
	got := acquireBatch(ctx, t, ss, "beta", []string{"tampered", "free"})
	if l := got["tampered"]; l.Term <= held.Term || l.Wait < held.TTL || l.Wait > held.TTL+time.Second {
		t.Fatalf("the grant after a lease node deleted from outside: term %d wait %s, want a term above %d and a wait of about %s", l.Term, l.Wait, held.Term, held.TTL)
	}
	if l := got["free"]; l.Wait != 0 {
		t.Fatalf("the free key batched with it waits %s, want no wait", l.Wait)
	}
}
