package zk_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/zk"
	"github.com/tenurehq/tenure/storetest"
)

// tamperedStore opens a store under root on the shared server, and a
// tamperOn for the same root.
func tamperedStore(t *testing.T, root string) (*storetest.Tamper, *zk.Store) {
	t.Helper()
	srv := server(t)
	tm := tamperOn(t, srv, root)
	return tm, open(t, "zk://"+srv.Addr+root)
}

// tamperOn changes the store's nodes under root with a plain ZooKeeper
// client, as an operator in zkCli would.
func tamperOn(t *testing.T, srv *testserver.ZKServer, root string) *storetest.Tamper {
	c := rawConn(t, srv)
	must := func(tb testing.TB, err error) {
		tb.Helper()
		if err != nil && !errors.Is(err, gozk.ErrNoNode) {
			tb.Fatalf("tamper: %v", err)
		}
	}
	return &storetest.Tamper{
		DeleteGrant: func(tb testing.TB, key string) {
			must(tb, c.Delete(zk.KeyPath(root, key)+"/lease", -1))
		},
		OverwriteGrant: func(tb testing.TB, key, id string) {
			_, err := c.Set(zk.KeyPath(root, key), []byte(`{"holder":"`+id+`","ttl_ns":1000000000}`), -1)
			must(tb, err)
		},
		DeleteAll: func(tb testing.TB, key string) {
			kp := zk.KeyPath(root, key)
			must(tb, c.Delete(kp+"/lease", -1))
			must(tb, c.Delete(kp, -1))
		},
	}
}

// TestSessionForgedRecordCannotExhaustTerms: a key node whose data was
// rewritten with a plain client to name the largest numbers there are
// cannot put the key's term at the top of its range: the term is the
// Mzxid of the grant's own write, assigned by the server, so a session's
// Acquire and AcquireBatch still grant a term above every term shown.
func TestSessionForgedRecordCannotExhaustTerms(t *testing.T) {
	srv := server(t)
	const root = "/forgedterm"
	st := open(t, "zk://"+srv.Addr+root)
	raw := rawConn(t, srv)
	ss := openSess(t, st, 5*time.Second)
	forged := `{"holder":"x","ttl_ns":9223372036854775807,"session":9223372036854775807,"term":9223372036854775807}`
	storetest.SessionOutgrowsForgedTerm(t, st, ss, func(key string) error {
		_, err := raw.Set(zk.KeyPath(root, key), []byte(forged), -1)
		return err
	})
}

// TestForeignChildOfKeyNode: a node created with zkCli under a key node
// beside (or instead of) its lease node must not count as a grant. Before,
// a key whose grant was released read as still held by its last holder
// for as long as the foreign child stayed, and no Acquire could take it;
// and a holder whose lease node was deleted from outside renewed on.
func TestForeignChildOfKeyNode(t *testing.T) {
	srv := server(t)
	// A root of its own per run: the foreign nodes it creates outlive it
	// on the package's shared server (go test -count=2).
	root := "/foreignchild-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st, b := open(t, "zk://"+srv.Addr+root), open(t, "zk://"+srv.Addr+root)
	raw := rawConn(t, srv)
	ctx := ctxT(t, 30*time.Second)
	// grantBesideChild grants key to alpha, then creates a node beside
	// its lease node.
	grantBesideChild := func(t *testing.T, key string) tenure.Lease {
		t.Helper()
		l, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Create(zk.KeyPath(root, key)+"/other", []byte("x"), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("Released", func(t *testing.T) {
		l := grantBesideChild(t, "released")
		if err := st.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		if r, err := b.Get(ctx, l.Key); err != nil || r.Held() {
			t.Fatalf("Get after the grant was released = %+v, %v; want free", r, err)
		}
		w, err := b.Watch(ctx, l.Key)
		if err != nil {
			t.Fatal(err)
		}
		if r := <-w; r.Held() {
			t.Fatalf("Watch after the grant was released delivered %+v; want free", r)
		}
		l2, err := b.Acquire(ctx, l.Key, "beta", 5*time.Second)
		if err != nil || l2.Term <= l.Term {
			t.Fatalf("Acquire after the grant was released = %+v, %v; want a term above %d", l2, err, l.Term)
		}
		if r, err := st.Get(ctx, l.Key); err != nil || r.Holder != "beta" || r.Term != l2.Term {
			t.Fatalf("Get after beta's grant = %+v, %v; want beta at term %d", r, err, l2.Term)
		}
	})
	t.Run("LeaseDeleted", func(t *testing.T) {
		l := grantBesideChild(t, "deleted")
		if err := st.Renew(ctx, l); err != nil {
			t.Fatalf("Renew with a foreign child beside the lease node: %v", err)
		}
		if err := raw.Delete(zk.KeyPath(root, l.Key)+"/lease", -1); err != nil {
			t.Fatal(err)
		}
		storetest.Tampered(t, "Renew after the lease node was deleted", st.Renew(ctx, l), l.Key, tenure.ErrLost)
		if r, err := b.Get(ctx, l.Key); err != nil || r.Held() {
			t.Fatalf("Get after the lease node was deleted = %+v, %v; want free", r, err)
		}
	})
}

// acquirers are the ways a candidate on store b can take a key: a plain
// Acquire, a session's Acquire, and a session's AcquireBatch (with a
// second, free key beside it, so that the batch's own multi-operation is
// tried).
func acquirers(t *testing.T, b *zk.Store, ttl time.Duration) map[string]func(ctx context.Context, key string) (tenure.Lease, error) {
	ss := openSess(t, b, ttl)
	return map[string]func(context.Context, string) (tenure.Lease, error){
		"Acquire": func(ctx context.Context, key string) (tenure.Lease, error) {
			return b.Acquire(ctx, key, "beta", ttl)
		},
		"SessionAcquire": func(ctx context.Context, key string) (tenure.Lease, error) {
			return ss.Acquire(ctx, key, "beta", "")
		},
		"AcquireBatch": func(ctx context.Context, key string) (tenure.Lease, error) {
			res := ss.(tenure.BatchAcquirer).AcquireBatch(ctx, []tenure.AcquireRequest{
				{Key: key, Identity: "beta"}, {Key: key + "-free", Identity: "beta"}})
			return res[0].Lease, res[0].Err
		},
	}
}

// wantWaitCovers fails t unless l2, acquired with the request sent at
// acqSent, waits until old's holder, whose last Renew was sent at
// renewSent, has reached its renew deadline, and not much longer.
func wantWaitCovers(t *testing.T, old, l2 tenure.Lease, renewSent, acqSent time.Time) {
	t.Helper()
	if l2.Term <= old.Term {
		t.Fatalf("the next grant has term %d, not above the old %d", l2.Term, old.Term)
	}
	if start, deadline := acqSent.Add(l2.Wait), renewSent.Add(old.TTL); start.Before(deadline) {
		t.Fatalf("the next grant has Wait %s: it would start %s before the old holder's renew deadline (TTL %s)",
			l2.Wait, deadline.Sub(start), old.TTL)
	}
	if l2.Wait > old.TTL+2*time.Second {
		t.Fatalf("the next grant has Wait %s, more than the old TTL %s needs", l2.Wait, old.TTL)
	}
}

// TestForgedRecordStillWaits: a key node whose record was rewritten with a
// plain client to name another session (or none), and whose lease node was
// then deleted, while the holder's session lives on. The next grant must
// still wait out the holder's renew window, whichever way it is acquired:
// before, the marker check asked after the session the record named, found
// no marker, and the next holder started at once beside the old one.
func TestForgedRecordStillWaits(t *testing.T) {
	srv := server(t)
	root := "/forgedsession-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st, b := open(t, "zk://"+srv.Addr+root), open(t, "zk://"+srv.Addr+root)
	raw := rawConn(t, srv)
	ctx := ctxT(t, 60*time.Second)
	const ttl = 3 * time.Second
	forgeries := map[string]func(rec map[string]any){
		"SessionChanged": func(rec map[string]any) { rec["session"] = 0x123456789 },
		"SessionRemoved": func(rec map[string]any) { delete(rec, "session") },
	}
	for path, acquire := range acquirers(t, b, ttl) {
		for name, forge := range forgeries {
			t.Run(path+"/"+name, func(t *testing.T) {
				key := path + "-" + name
				l, renewSent := grantedAgain(t, ctx, st, key, ttl)
				kp := zk.KeyPath(root, key)
				data, _, err := raw.Get(kp)
				if err != nil {
					t.Fatal(err)
				}
				rec := map[string]any{}
				if err := json.Unmarshal(data, &rec); err != nil {
					t.Fatal(err)
				}
				forge(rec)
				data, _ = json.Marshal(rec)
				if _, err := raw.Set(kp, data, -1); err != nil {
					t.Fatal(err)
				}
				if err := raw.Delete(kp+"/lease", -1); err != nil {
					t.Fatal(err)
				}
				acqSent := time.Now()
				l2, err := acquire(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				wantWaitCovers(t, l, l2, renewSent, acqSent)
			})
		}
	}
}

// grantedAgain grants key to "alpha" on st and renews it once, returning
// the lease and when the renewal was sent. The key is granted and released
// once before, so that a batch takes it in its multi-operation (a batch
// sends a key it never saw on its own).
func grantedAgain(t *testing.T, ctx context.Context, st *zk.Store, key string, ttl time.Duration) (tenure.Lease, time.Time) {
	t.Helper()
	l0, err := st.Acquire(ctx, key, "setup", ttl)
	if err == nil {
		err = st.Release(ctx, l0)
	}
	if err != nil {
		t.Fatal(err)
	}
	l, err := st.Acquire(ctx, key, "alpha", ttl)
	if err != nil {
		t.Fatal(err)
	}
	renewSent := time.Now()
	if err := st.Renew(ctx, l); err != nil {
		t.Fatal(err)
	}
	return l, renewSent
}

// TestPersistentLeaseNode: a lease node that no session owns, created by
// hand with zkCli (after a release, or in place of a live grant's
// ephemeral one), is not a grant: tenure creates lease nodes ephemeral
// only. Before, it held the key for good: no session's end ever deleted
// it, Get, Watch and `tenure status` showed the last holder leading
// forever, and no candidate could acquire the key. Now the key reads
// free, and the next grant, whichever way it is acquired, takes the key
// (replacing the node with its own) and waits out the last holder's renew
// window, since that holder may believe it still leads; that holder's
// Renew fails.
func TestPersistentLeaseNode(t *testing.T) {
	srv := server(t)
	root := "/persistentlease-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st, b := open(t, "zk://"+srv.Addr+root), open(t, "zk://"+srv.Addr+root)
	raw := rawConn(t, srv)
	ctx := ctxT(t, 60*time.Second)
	const ttl = 3 * time.Second
	for path, acquire := range acquirers(t, b, ttl) {
		for _, replacing := range []bool{false, true} {
			key := path + "-released"
			if replacing {
				key = path + "-replacing"
			}
			t.Run(key, func(t *testing.T) {
				l, renewSent := grantedAgain(t, ctx, st, key, ttl)
				lp := zk.KeyPath(root, key) + "/lease"
				var err error
				if replacing {
					err = raw.Delete(lp, -1)
				} else {
					err = st.Release(ctx, l)
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := raw.Create(lp, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
					t.Fatal(err)
				}
				if r, err := b.Get(ctx, key); err != nil || r.Held() {
					t.Fatalf("Get with a lease node no session owns = %+v, %v; want free", r, err)
				}
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				ch, err := b.Watch(wctx, key)
				if err != nil {
					t.Fatal(err)
				}
				w := &watchSteps{ch: ch, terms: map[string]uint64{}}
				if w.last = <-ch; w.last.Held() {
					t.Fatalf("Watch with a lease node no session owns delivered %+v; want free", w.last)
				}
				acqSent := time.Now()
				l2, err := acquire(ctx, key)
				if err != nil {
					t.Fatalf("acquire with a lease node no session owns: %v", err)
				}
				wantWaitCovers(t, l, l2, renewSent, acqSent)
				w.expect(t, "granted", "beta")
				if _, lst, err := raw.Exists(lp); err != nil || lst.EphemeralOwner == 0 {
					t.Fatalf("the lease node after the grant: %+v, %v; want an ephemeral one", lst, err)
				}
				if replacing {
					storetest.Tampered(t, "Renew of the grant whose lease node was replaced", st.Renew(ctx, l), key, tenure.ErrLost)
				}
			})
		}
	}
}

// wantHandMadeHeld fails t unless Get and Watch show key, whose lease
// node was made again by hand with a session of its own, held by someone
// unknown: not by the holder the key node's data names, whose grant is
// gone (before, they showed that holder leading still, and its own watch
// saw nothing amiss).
func wantHandMadeHeld(t *testing.T, ctx context.Context, st *zk.Store, key string) {
	t.Helper()
	if r, err := st.Get(ctx, key); err != nil || !r.Held() || r.Holder == "alpha" {
		t.Fatalf("Get with a hand-made ephemeral lease node = %+v, %v; want held by someone unknown", r, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, err := st.Watch(wctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; !r.Held() || r.Holder == "alpha" {
		t.Fatalf("Watch with a hand-made ephemeral lease node delivered %+v; want held by someone unknown", r)
	}
}

// TestReleaseLeavesHandMadeLeaseNode: the lease node of a live grant is
// deleted with a plain client and made again by hand, ephemeral in the
// tool's own session (an operator holding the key while they repair
// something) or persistent. The key node, its zxid and version are as the
// grant left them. The old holder's Release, on its way out, must see the
// grant is gone (ErrLost) and leave the new node alone: before, it checked
// the key node only and deleted whatever lease node was there, freeing
// the key under the tool that held it.
func TestReleaseLeavesHandMadeLeaseNode(t *testing.T) {
	srv := server(t)
	root := "/handmadelease-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st := open(t, "zk://"+srv.Addr+root)
	raw := rawConn(t, srv)
	ctx := ctxT(t, 60*time.Second)
	ss := openSess(t, st, 5*time.Second)
	acquire := map[string]func(key string) (tenure.Lease, error){
		"Store":   func(key string) (tenure.Lease, error) { return st.Acquire(ctx, key, "alpha", 5*time.Second) },
		"Session": func(key string) (tenure.Lease, error) { return ss.Acquire(ctx, key, "alpha", "") },
	}
	release := map[string]func(l tenure.Lease) error{
		"Store":   func(l tenure.Lease) error { return st.Release(ctx, l) },
		"Session": func(l tenure.Lease) error { return ss.Release(ctx, l) },
	}
	for _, path := range []string{"Store", "Session"} {
		for _, flags := range []int32{gozk.FlagEphemeral, 0} {
			name := path + "/ephemeral"
			if flags == 0 {
				name = path + "/persistent"
			}
			t.Run(name, func(t *testing.T) {
				key := strings.ReplaceAll(name, "/", "-")
				l, err := acquire[path](key)
				if err != nil {
					t.Fatal(err)
				}
				lp := zk.KeyPath(root, key) + "/lease"
				if err := raw.Delete(lp, -1); err != nil {
					t.Fatal(err)
				}
				if _, err := raw.Create(lp, []byte("maintenance"), flags, gozk.WorldACL(gozk.PermAll)); err != nil {
					t.Fatal(err)
				}
				_, before, err := raw.Exists(lp)
				if err != nil {
					t.Fatal(err)
				}
				if flags != 0 {
					wantHandMadeHeld(t, ctx, st, key)
				}
				storetest.Tampered(t, "Release of the grant whose lease node was made again by hand", release[path](l), key, tenure.ErrLost)
				ok, after, err := raw.Exists(lp)
				if err != nil || !ok || after.Czxid != before.Czxid {
					t.Fatalf("the hand-made lease node after the old holder's Release: exists %v, %+v, %v; want it left alone", ok, after, err)
				}
				if flags == 0 {
					return
				}
				// Campaigning again, the old holder must not take the
				// node for a grant of its own whose answer it lost.
				if l2, err := acquire[path](key); !errors.Is(err, tenure.ErrHeld) {
					t.Fatalf("Acquire again by the old holder with the hand-made node in place = %+v, %v; want ErrHeld", l2, err)
				}
			})
		}
	}
}
