package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/internal/testserver/etcdtest"
	"github.com/tenurehq/tenure/store/etcd"
	"github.com/tenurehq/tenure/storetest"
)

// openOn returns an opener of handles on srv, each with its own client, as
// separate processes would have.
func openOn(srv *etcdtest.Server, prefix string) func(t testing.TB) tenure.Store {
	return func(t testing.TB) tenure.Store {
		t.Helper()
		return storetest.OpenClosing(t, tenure.Open, "etcd://"+srv.Endpoint+prefix)
	}
}

func TestConformance(t *testing.T) {
	srv := etcdtest.Start(t)
	storetest.Run(t, storetest.Options{
		Sessions: true,
		Open:     openOn(srv, "/conformance"),
		TTL:      time.Second,
		// etcd checks for expired leases every 500 ms.
		Tolerance: 750 * time.Millisecond,
		Restart:   srv.Restart,
		Tamper:    tamperOn(t, srv, "/conformance"),
	})
}

// tamperOn changes what the store keeps under prefix with a plain etcd
// client, as an operator or another tool would.
func tamperOn(t *testing.T, srv *etcdtest.Server, prefix string) *storetest.Tamper {
	c := rawClient(t, srv)
	do := func(t testing.TB, ops ...clientv3.Op) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			t.Fatalf("tamper: %v", err)
		}
	}
	return &storetest.Tamper{
		DeleteGrant: func(t testing.TB, key string) { do(t, clientv3.OpDelete(prefix+"/holder/"+key)) },
		OverwriteGrant: func(t testing.TB, key, id string) {
			do(t, clientv3.OpPut(prefix+"/holder/"+key, fmt.Sprintf(`{"holder":%q,"ttl_ns":1000000000}`, id)))
		},
		DeleteAll: func(t testing.TB, key string) {
			do(t, clientv3.OpDelete(prefix+"/holder/"+key), clientv3.OpDelete(prefix+"/term/"+key))
		},
	}
}

func BenchmarkFailover(b *testing.B) {
	storetest.BenchFailover(b, storetest.BenchOptions{Open: openOn(etcdtest.Start(b), "/bench")})
}

// openStore opens a store on srv under prefix, closed at the end of the
// test.
func openStore(t testing.TB, srv *etcdtest.Server, prefix string) *etcd.Store {
	t.Helper()
	return storetest.OpenClosing(t, etcd.Open, "etcd://"+srv.Endpoint+prefix)
}

// rawClient is a plain etcd client, to look at what the store wrote.
func rawClient(t testing.TB, srv *etcdtest.Server) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestGrantIsEtcdLease checks the mapping onto etcd: the term is the holder
// key's CreateRevision, the key is attached to its own lease whose TTL is
// the requested one rounded up to whole seconds, and Release revokes it.
func TestGrantIsEtcdLease(t *testing.T) {
	srv := etcdtest.Start(t)
	st := openStore(t, srv, "/mapping")
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 20*time.Second)

	l, err := st.Acquire(ctx, "jobs/nightly", "alpha", 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := raw.Get(ctx, "/mapping/holder/jobs/nightly")
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("holder key: %v, %v", resp, err)
	}
	kv := resp.Kvs[0]
	if uint64(kv.CreateRevision) != l.Term {
		t.Fatalf("term %d, holder key CreateRevision %d", l.Term, kv.CreateRevision)
	}
	ttl, err := raw.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		t.Fatal(err)
	}
	if ttl.GrantedTTL != 2 {
		t.Fatalf("etcd lease granted TTL = %ds, want 1.5s rounded up to 2s", ttl.GrantedTTL)
	}
	if r, err := st.Get(ctx, "jobs/nightly"); err != nil || r.Remaining <= 0 || r.Remaining > 2*time.Second {
		t.Fatalf("Get = %+v, %v: want Remaining in (0, 2s]", r, err)
	}
	// A write elsewhere in etcd moves the revision: the next term is above it.
	put, err := raw.Put(ctx, "/unrelated", "x")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if ttl, err := raw.TimeToLive(ctx, clientv3.LeaseID(kv.Lease)); err != nil || ttl.TTL != -1 {
		t.Fatalf("after Release the etcd lease lives on: %+v, %v", ttl, err)
	}
	l2, err := st.Acquire(ctx, "jobs/nightly", "beta", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Term <= uint64(put.Header.Revision) {
		t.Fatalf("new term %d not above revision %d of a later write", l2.Term, put.Header.Revision)
	}
}

// TestServerDownAndBack checks that calls against a stopped server fail
// within their context with an error naming the endpoint, and that the same
// handle works again, by itself, once the server is back.
func TestServerDownAndBack(t *testing.T) {
	srv := etcdtest.Start(t)
	st := openStore(t, srv, "/down")
	ctx := storetest.Context(t, 60*time.Second)
	l, err := st.Acquire(ctx, "k", "alpha", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// The watch ends or keeps quiet while the server is away; either way it
	// must not deliver a wrong record. Open it before the outage.
	srv.Stop()

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err = st.Get(short, "k")
	took := time.Since(began)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get with the server down: %v, want context.DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), srv.Endpoint) {
		t.Errorf("error %q does not name the endpoint %s", err, srv.Endpoint)
	}
	if took > 2*time.Second {
		t.Errorf("Get with a 300ms context took %s", took)
	}
	if err := st.Renew(short, l); err == nil || errors.Is(err, tenure.ErrLost) {
		t.Errorf("Renew with the server down: %v, want a transient (non-ErrLost) error", err)
	}

	srv.Start(t)
	var r tenure.Record
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		r, err = st.Get(rctx, "k")
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the handle did not recover after the restart: %v", err)
		}
	}
	// etcd restarts lease TTLs on a new leader, so the grant survived.
	if r.Holder != "alpha" || r.Term != l.Term {
		t.Fatalf("after restart Get = %+v, want alpha term %d", r, l.Term)
	}
	if err := st.Renew(ctx, l); err != nil {
		t.Fatalf("Renew after restart: %v", err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatalf("Release after restart: %v", err)
	}
}

// TestCredentialsNeverInErrors runs etcd with authentication and checks
// that neither a wrong nor a right password shows up in any error.
func TestCredentialsNeverInErrors(t *testing.T) {
	srv := etcdtest.Start(t)
	const good, bad = "g00d-Secret-pw", "wr0ng-Secret-pw"
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 30*time.Second)
	for _, step := range []func() error{
		func() error { _, err := raw.UserAdd(ctx, "root", good); return err },
		func() error { _, err := raw.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := raw.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("set up etcd auth: %v", err)
		}
	}
	_, err := tenure.Open(ctx, fmt.Sprintf("etcd://root:%s@%s/auth", bad, srv.Endpoint))
	storetest.FailsHiding(t, "Open with a wrong password", err, good, bad)

	down := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = tenure.Open(short, fmt.Sprintf("etcd://root:%s@%s/auth", good, down))
	storetest.FailsHiding(t, "Open of a server that is down", err, good, bad)

	_, err = tenure.Open(ctx, fmt.Sprintf("etcd://root:%s@%s/auth?dial=1", good, srv.Endpoint))
	storetest.FailsHiding(t, "Open with a bad URL", err, good, bad)

	st, err := tenure.Open(ctx, fmt.Sprintf("etcd://root:%s@%s/auth", good, srv.Endpoint))
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	defer st.Close()
	storetest.HeldFailsHiding(t, st, good, bad)
	// A client without credentials is refused by etcd, without leaking ours.
	anon, err := tenure.Open(ctx, "etcd://"+srv.Endpoint+"/auth")
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	_, err = anon.Get(ctx, "k")
	storetest.FailsHiding(t, "Get without credentials", err, good, bad)
}

func TestBadURLs(t *testing.T) {
	storetest.InvalidURLs(t, "", tenure.Open,
		"etcd://",
		"etcd://127.0.0.1/prefix",
		"etcd://127.0.0.1:2379,nohost/prefix",
		"etcd://127.0.0.1:2379/prefix?tls=true",
	)
	st, err := etcd.Open(context.Background(), "etcd://127.0.0.1:1,127.0.0.1:2")
	if err != nil {
		t.Fatalf("a URL with two endpoints and no prefix: %v", err)
	}
	defer st.Close()
	if st.Prefix() != etcd.DefaultPrefix {
		t.Errorf("prefix %q, want %q", st.Prefix(), etcd.DefaultPrefix)
	}
}

// TestCloseEndsWatch checks that closing the store closes its watches.
func TestCloseEndsWatch(t *testing.T) {
	srv := etcdtest.Start(t)
	st := openStore(t, srv, "/close")
	ch, err := st.Watch(storetest.Context(t, 30*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Held() {
		t.Fatalf("initial record %+v", r)
	}
	st.Close()
	for range ch {
	}
	if _, err := st.Watch(context.Background(), "k"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Watch after Close: %v", err)
	}
}

// TestForeignValueLooksHeld checks that a holder key tenure did not write
// (no lease, a value it cannot read) reads as held by "(unknown)" and that
// Acquire reports it held rather than spinning.
func TestForeignValueLooksHeld(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 10*time.Second)
	if _, err := raw.Put(ctx, "/foreign/holder/k", "not json"); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, srv, "/foreign")
	_, err := st.Acquire(ctx, "k", "alpha", time.Second)
	var held *tenure.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "(unknown)" || held.Record.Term == 0 {
		t.Fatalf("Acquire of a key held by a foreign value: %v, want HeldError naming (unknown)", err)
	}
}

// A server whose --max-txn-ops is below what a batch's transaction needs
// still grants every key of the batch, one by one.
func TestBatchOnASmallTxnLimit(t *testing.T) {
	st := openOn(etcdtest.StartWith(t, 16), "/small-txn")(t)
	ss, err := st.(tenure.SessionStore).OpenSession(context.Background(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close(context.Background())
	reqs := make([]tenure.AcquireRequest, 45)
	for i := range reqs {
		reqs[i] = tenure.AcquireRequest{Key: fmt.Sprintf("k%d", i), Identity: "alpha"}
	}
	for i, r := range ss.(tenure.BatchAcquirer).AcquireBatch(context.Background(), reqs) {
		if r.Err != nil || r.Lease.Key != reqs[i].Key || r.Lease.Term == 0 {
			t.Fatalf("batch result %d on --max-txn-ops 16: %+v, %v", i, r.Lease, r.Err)
		}
	}
}

// A term key rewritten with etcdctl to record a term above any revision
// (here 9e18) must not show the key at that term: the handle would then
// grant a term, an etcd revision, below the one it had just shown. Every
// term tenure records is the revision of an earlier write, so one above
// the term key's own ModRevision is not believed.
func TestForgedLastTermNotBelieved(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 10*time.Second)
	st := openStore(t, srv, "/forged")
	l, err := st.Acquire(ctx, "k", "alpha", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, "/forged/term/k", `{"holder":"alpha","ttl_ns":1000000000,"term":9000000000000000000,"released":true}`); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	l2, err := st.Acquire(ctx, "k", "alpha", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Term <= r.Term || l2.Term <= l.Term {
		t.Fatalf("Get showed the key free at term %d, then Acquire granted term %d", r.Term, l2.Term)
	}
}

// As TestForgedLastTermNotBelieved, with the largest term there is
// (2^63-1), through a session's Acquire and AcquireBatch: a session's term
// is the revision of its grant's transaction too, assigned by the server,
// so the forged record neither exhausts the key nor wraps its term.
func TestSessionForgedLastTermNotBelieved(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 10*time.Second)
	st := openStore(t, srv, "/forged-session")
	ss, err := st.OpenSession(ctx, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close(context.Background())
	storetest.SessionOutgrowsForgedTerm(t, st, ss, func(key string) error {
		_, err := raw.Put(ctx, "/forged-session/term/"+key, `{"holder":"alpha","ttl_ns":1000000000,"term":9223372036854775807,"released":true}`)
		return err
	})
}

// A holder key rewritten with etcdctl to a TTL of 2^63-1 ns: the holder's
// record, as Acquire reports it, must not show an overflowed, negative
// Remaining.
func TestHugeTTLDoesNotOverflow(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 10*time.Second)
	if _, err := raw.Put(ctx, "/hugettl/holder/k", `{"holder":"mallory","ttl_ns":9223372036854775807}`); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, srv, "/hugettl")
	_, err := st.Acquire(ctx, "k", "alpha", time.Second)
	var held *tenure.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "mallory" || held.Record.Remaining < 0 {
		t.Fatalf("Acquire of a key held with TTL 2^63-1 ns: %v, want held by mallory with a Remaining not below 0", err)
	}
	r, err := st.Get(ctx, "k")
	if err != nil || r.Holder != "mallory" || r.Remaining < 0 || r.TTL < 0 {
		t.Fatalf("Get = %+v, %v; want held by mallory without negative durations", r, err)
	}
}

// A holder key rewritten with a plain etcdctl put, as an operator fixing
// its value would: etcd then detaches it from its lease, so it would never
// expire, and once its holder stopped (its Renew reports the grant lost)
// no candidate could ever take the key. The next Acquire that finds it
// puts it back under a lease of its own TTL, as Redis's store gives a
// grant whose expiry was removed its TTL back: the key is free within
// that TTL, and the grant after it waits out the old holder's TTL.
// The session's batch path repairs it too.
func TestLeaselessHolderKeyExpires(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	for name, acquire := range map[string]func(ctx context.Context, b *etcd.Store) error{
		"Acquire": func(ctx context.Context, b *etcd.Store) error {
			_, err := b.Acquire(ctx, "k", "beta", time.Second)
			return err
		},
		"AcquireBatch": func(ctx context.Context, b *etcd.Store) error {
			ss, err := b.OpenSession(ctx, time.Second)
			if err != nil {
				return err
			}
			defer ss.Close(ctx)
			return ss.(tenure.BatchAcquirer).AcquireBatch(ctx, []tenure.AcquireRequest{{Key: "k", Identity: "beta"}})[0].Err
		},
	} {
		t.Run(name, func(t *testing.T) { leaselessHolderKeyExpires(t, srv, raw, "/leaseless-"+name, acquire) })
	}
}

func leaselessHolderKeyExpires(t *testing.T, srv *etcdtest.Server, raw *clientv3.Client, prefix string, acquire func(context.Context, *etcd.Store) error) {
	ctx := storetest.Context(t, 20*time.Second)
	a, b := openStore(t, srv, prefix), openStore(t, srv, prefix)
	l, err := a.Acquire(ctx, "k", "alpha", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, prefix+"/holder/k", `{"holder":"alpha","ttl_ns":2000000000}`); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew of the grant whose key lost its lease: %v, want ErrLost", err)
	}
	if err := acquire(ctx, b); !errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire of the key: %v, want ErrHeld", err)
	}
	ch, err := b.Watch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(5 * time.Second) // the key's TTL is 1 s, the old one's 2 s
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatal("the watch closed")
			}
			if r.Held() {
				continue
			}
			l2, err := b.Acquire(ctx, "k", "beta", time.Second)
			if err != nil || l2.Term <= l.Term {
				t.Fatalf("Acquire once the key read free: %+v, %v", l2, err)
			}
			return
		case <-timeout:
			r, err := b.Get(ctx, "k")
			t.Fatalf("5 s after an Acquire found the key without a lease, it still reads %+v, %v", r, err)
		}
	}
}
