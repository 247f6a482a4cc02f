package zk_test

import (
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/zk"
)

// TestWatchEachKindOfChange follows one key through every kind of change
// a watch sees: a grant (the lease node's and the key node's watches
// fire), a key node rewritten from outside (data only), a lease node
// deleted from outside (the lease node's watch only: delivered from the
// event), a release (likewise), the key node deleted and created again
// (existence watch). Each is delivered, in order, with terms that never go
// back, and no record mixes the key node's data before a change with its
// stat after it.
func TestWatchEachKindOfChange(t *testing.T) {
	tm, st := tamperedStore(t, "/watchkinds")
	ctx := ctxT(t, 60*time.Second)
	const key = "k"
	// The key node exists before the watch: its watches are the lease
	// node's existence watch and the key node's data watch.
	l, err := st.Acquire(ctx, key, "setup", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	ch, err := st.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	expect := (&watchSteps{ch: ch, terms: map[string]uint64{}}).expect
	expect(t, "initial", "")
	a, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "grant", "alpha")
	tm.OverwriteGrant(t, key, "mallory")
	expect(t, "overwritten from outside", "mallory")
	tm.DeleteGrant(t, key)
	expect(t, "lease node deleted from outside", "")
	_ = st.Release(ctx, a) // superseded: its session ends
	b, err := st.Acquire(ctx, key, "beta", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "grant again", "beta")
	if err := st.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	expect(t, "release", "")
	c, err := st.Acquire(ctx, key, "gamma", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "grant after a release", "gamma")
	tm.DeleteAll(t, key)
	expect(t, "key node deleted", "")
	_ = st.Release(ctx, c)
	if _, err := st.Acquire(ctx, key, "delta", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, "key node created again", "delta")
}

// watchSteps reads a watch's records step by step, checking on the way
// that terms never go back and that each holder is delivered at one term
// only (a record never mixes two states of the key node).
type watchSteps struct {
	ch    <-chan tenure.Record
	last  tenure.Record
	terms map[string]uint64
}

// expect reads records until one held by holder ("" for free) comes, for
// at most 10 s.
func (w *watchSteps) expect(t *testing.T, step, holder string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case r, ok := <-w.ch:
			if !ok {
				t.Fatalf("%s: the watch ended", step)
			}
			if r.Term < w.last.Term {
				t.Fatalf("%s: term went from %d to %d", step, w.last.Term, r.Term)
			}
			w.last = r
			if r.Holder != "" {
				if term, ok := w.terms[r.Holder]; ok && term != r.Term {
					t.Fatalf("%s: %q delivered at term %d, and before at term %d: a record mixes two states of the key node", step, r.Holder, r.Term, term)
				}
				w.terms[r.Holder] = r.Term
			}
			if r.Holder == holder {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no record held by %q delivered (last %+v)", step, holder, w.last)
		}
	}
}

// TestWatchFollowsOwnSessionsGrant checks that a watch of a key whose
// holder's session ends and that a session of the same Store then takes
// (a crashed process's keys moving to a candidate whose own batch wins
// them) sends no request to arm its watches again: it delivers the end of
// the grant from the lease node's deletion event, at the ended grant's
// term, and the new grant from the session's bookkeeping, relying on the
// session's own watches of the grant until the grant ends. It then checks
// that the watch still
// delivers every end of the grant: a release, a lease node deleted from
// outside, and a key node rewritten from outside while the session's
// connection is cut off (the session cannot vouch for its grants then).
func TestWatchFollowsOwnSessionsGrant(t *testing.T) {
	tm, st := tamperedStore(t, "/watchown")
	ctx := ctxT(t, 60*time.Second)
	keys := []string{"released", "deleted", "cutoff"}
	first := openSess(t, st, 5*time.Second)
	acquireAll(ctx, t, first, keys...) // as alpha; a batch grants known keys in one multi
	steps := map[string]*watchSteps{}
	for _, k := range keys {
		ch, err := st.Watch(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		steps[k] = &watchSteps{ch: ch, terms: map[string]uint64{}}
		steps[k].expect(t, k+": initial", "alpha")
	}
	var rearms atomic.Int64
	defer zk.BeforeRearm(func(key string) {
		if slices.Contains(keys, key) {
			rearms.Add(1)
		}
	})()
	alpha := map[string]uint64{}
	for _, k := range keys {
		alpha[k] = steps[k].last.Term
	}
	if err := first.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		steps[k].expect(t, k+": the holder's session closed", "")
		if got := steps[k].last.Term; got != alpha[k] {
			t.Fatalf("%s: free delivered at term %d, want the ended grant's %d", k, got, alpha[k])
		}
	}
	ss := openSess(t, st, 5*time.Second)
	leases := acquireBatch(ctx, t, ss, "beta", keys)
	for _, k := range keys {
		steps[k].expect(t, k+": taken by the store's own session", "beta")
		if got := steps[k].last.Term; got != leases[k].Term {
			t.Fatalf("%s: delivered term %d, the grant's is %d", k, got, leases[k].Term)
		}
	}
	keepAlive(t, ss) // the grants' own watches are set
	if n := rearms.Load(); n != 0 {
		t.Fatalf("%d re-arms of watches on keys whose grants ended and which the store's own session then took, want none", n)
	}
	if err := ss.Release(ctx, leases["released"]); err != nil {
		t.Fatal(err)
	}
	steps["released"].expect(t, "released", "")
	tm.DeleteGrant(t, "deleted")
	steps["deleted"].expect(t, "lease node deleted from outside", "")
	resume := zk.PauseSession(ss)
	defer resume()
	tm.OverwriteGrant(t, "cutoff", "mallory")
	steps["cutoff"].expect(t, "rewritten from outside while the session is cut off", "mallory")
}

// TestWatchSeesLeaseNodeMadeAfterRelease checks the one change that the
// key node's data watch alone does not see once a watch delivered a lease
// node's deletion without arming the lease node's watch again: a lease
// node created from outside, without a rewrite of the key node. The watch
// arms the lease node's watch again after spentLeaseWait and reports the
// key held, and the next grant is seen at once after that. The lease node
// is made ephemeral, by a live session (a plain client's): one that no
// session owns is no grant and never reads held (TestPersistentLeaseNode),
// so the last step makes one and the next grant takes the key from it.
func TestWatchSeesLeaseNodeMadeAfterRelease(t *testing.T) {
	defer zk.SpentLeaseWait(300 * time.Millisecond)()
	srv := server(t)
	const root = "/watchspent"
	st := open(t, "zk://"+srv.Addr+root)
	raw := rawConn(t, srv)
	ctx := ctxT(t, 30*time.Second)
	const key = "k"
	l, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := st.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	w := &watchSteps{ch: ch, terms: map[string]uint64{}}
	w.expect(t, "initial", "alpha")
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "released", "")
	if w.last.Term != l.Term {
		t.Fatalf("release delivered at term %d, want the grant's %d", w.last.Term, l.Term)
	}
	lp := zk.KeyPath(root, key) + "/lease"
	if _, err := raw.Create(lp, nil, gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	// The key node still names alpha's released grant, and now has a lease
	// node made after it: held, by someone unknown.
	w.expect(t, "lease node created from outside", "(unknown)")
	if err := raw.Delete(lp, -1); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "lease node deleted from outside", "")
	if _, err := raw.Create(lp, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Acquire(ctx, key, "beta", 5*time.Second); err != nil {
		t.Fatalf("Acquire with a lease node that no session owns: %v", err)
	}
	w.expect(t, "granted again", "beta")
}

// TestWatchLeaseNodeNoSessionOwns follows a free key through a lease node
// created by hand without the ephemeral flag (the lease node's watch
// fires: one read) and then a rewrite of the key node (the data watch
// fires: one read, the lease node as its watch last found it). A lease
// node that no session owns is no grant (TestPersistentLeaseNode), so
// the watch must never deliver the key held; before, it delivered
// mallory leading, for good.
func TestWatchLeaseNodeNoSessionOwns(t *testing.T) {
	tm, st := tamperedStore(t, "/watchorphan-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	srv := server(t)
	raw := rawConn(t, srv)
	ctx := ctxT(t, 30*time.Second)
	const key = "k"
	l, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
	if err == nil {
		err = st.Release(ctx, l)
	}
	if err != nil {
		t.Fatal(err)
	}
	ch, err := st.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	first := <-ch
	if first.Held() {
		t.Fatalf("initial record %+v, want free", first)
	}
	if _, err := raw.Create(zk.KeyPath(st.Path(), key)+"/lease", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	tm.OverwriteGrant(t, key, "mallory")
	timeout := time.After(10 * time.Second)
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatal("the watch ended")
			}
			if r.Held() {
				t.Fatalf("the watch delivered %+v with a lease node that no session owns; want free", r)
			}
			if r.Term > first.Term {
				return // the rewrite, seen free
			}
		case <-timeout:
			t.Fatal("the rewrite of the key node was not delivered")
		}
	}
}
