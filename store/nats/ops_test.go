package nats_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/internal/testserver/natstest"
	"github.com/tenurehq/tenure/store/nats"
	"github.com/tenurehq/tenure/storetest"
)

// A grant purged with the NATS client (kv.Purge, which drops the key's
// history too) ends: its holder's Renew is ErrLost, and the next grant,
// by a Store that never saw the old one, waits out the old grant's TTL,
// which the Store learns from the key's TTL window entry.
func TestPurgedGrantWaitsOutTheOldTTL(t *testing.T) {
	srv := natstest.Start(t)
	a := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	key := storetest.Key(t)
	old, err := a.Acquire(ctxFor(t), key, "alpha", 8*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	renewed := time.Now()
	if err := a.Renew(ctxFor(t), old); err != nil {
		t.Fatal(err)
	}
	if err := bucket(t, srv, "leases").Purge(ctxFor(t), natsKey(t, key)); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctxFor(t), old); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew of a purged grant: %v, want ErrLost", err)
	}
	b := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	sent := time.Now()
	l, err := b.Acquire(ctxFor(t), key, "beta", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Term <= old.Term {
		t.Fatalf("term after the purge %d, not above %d", l.Term, old.Term)
	}
	if start := sent.Add(l.Wait); start.Before(renewed.Add(old.TTL)) {
		t.Fatalf("Wait %s: the new holder would start %s before the old one's renew deadline", l.Wait, renewed.Add(old.TTL).Sub(start))
	}
	if err := b.Release(ctxFor(t), l); err != nil {
		t.Fatal(err)
	}
	c := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	if l3, err := c.Acquire(ctxFor(t), key, "gamma", time.Second); err != nil || l3.Wait != 0 || l3.Term <= l.Term {
		t.Fatalf("Acquire after a release = %+v, %v; want no Wait and a higher term", l3, err)
	}
}

// A grant's entry overwritten with something that is not a grant gives
// an error naming the key: never a free key, never a lower term.
func TestGarbageNamesTheKey(t *testing.T) {
	srv := natstest.Start(t)
	a := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	key := storetest.Key(t)
	l, err := a.Acquire(ctxFor(t), key, "alpha", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	kv := bucket(t, srv, "leases")
	for _, garbage := range []string{
		"garbage",
		`{"holder":"x","ttl_ns":1000000000,"term":999999999}`, // a term above its own revision
		`{"holder":"x","ttl_ns":1000000000,"term":1}`,         // a term below one seen
		`{"holder":"","ttl_ns":1000000000}`,
	} {
		if _, err := kv.Put(ctxFor(t), natsKey(t, key), []byte(garbage)); err != nil {
			t.Fatal(err)
		}
		for _, st := range []*nats.Store{a, storetest.OpenClosing(t, nats.Open, srv.URL("leases"))} {
			r, err := st.Get(ctxFor(t), key)
			if err == nil && garbage == `{"holder":"x","ttl_ns":1000000000,"term":1}` && st != a {
				continue // a Store that never saw a higher term cannot tell
			}
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) || errors.Is(err, tenure.ErrHeld) {
				t.Fatalf("Get of %s = %+v, %v; want an error naming the key", garbage, r, err)
			}
			if _, err := st.Acquire(ctxFor(t), key, "beta", time.Second); err == nil || errors.Is(err, tenure.ErrHeld) {
				t.Fatalf("Acquire over %s: %v; want an error naming the key", garbage, err)
			}
		}
		if err := a.Renew(ctxFor(t), l); !errors.Is(err, tenure.ErrLost) {
			t.Fatalf("Renew over %s: %v, want ErrLost", garbage, err)
		}
	}
}

// Terms keep growing across a restart of the server, also when the
// bucket's stream was purged to nothing before it (its last sequence is
// then kept only in the stream's state).
func TestTermsGrowAcrossRestartOfAnEmptyStream(t *testing.T) {
	srv := natstest.Start(t)
	a := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	key := storetest.Key(t)
	var last uint64
	for range 3 {
		l, err := a.Acquire(ctxFor(t), key, "alpha", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Release(ctxFor(t), l); err != nil {
			t.Fatal(err)
		}
		last = l.Term
	}
	stream, err := plainJS(t, srv).Stream(ctxFor(t), "KV_leases")
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	srv.Restart(t)
	b := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	l, err := b.Acquire(ctxFor(t), key, "beta", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l.Term <= last {
		t.Fatalf("after a purge and a restart the term is %d, not above %d", l.Term, last)
	}
}

// A bucket made without the options the store needs is refused with one
// line saying what to change.
func TestBucketWithoutTTLsRefused(t *testing.T) {
	srv := natstest.Start(t)
	if _, err := plainJS(t, srv).CreateKeyValue(ctxFor(t), jetstream.KeyValueConfig{Bucket: "plain", History: 5}); err != nil {
		t.Fatal(err)
	}
	st := storetest.OpenClosing(t, nats.Open, srv.URL("plain"))
	_, err := st.Acquire(ctxFor(t), "k", "alpha", time.Second)
	if !errors.Is(err, tenure.ErrInvalid) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "LimitMarkerTTL") || !strings.Contains(err.Error(), "history is 5") {
		t.Fatalf("Acquire on a bucket without per-key TTLs: %v; want one line naming LimitMarkerTTL and the history", err)
	}
	t.Log(err)
}

func TestPasswordNeverShown(t *testing.T) {
	const secret = "s3cr3t-pw"
	srv := natstest.StartAuth(t, "tenure", secret)
	st := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	l, err := st.Acquire(ctxFor(t), storetest.Key(t), "alpha", time.Second)
	if err != nil {
		t.Fatalf("Acquire with the right password: %v", err)
	}
	_ = st.Release(ctxFor(t), l)
	storetest.SecretHiddenURL(t, fmt.Sprintf("nats://tenure:%s-wrong@%s/leases", secret, srv.Addr), secret, "tenure/nats")
	// The errors say why there is no connection.
	wrong := storetest.OpenClosing(t, nats.Open, fmt.Sprintf("nats://tenure:%s-wrong@%s/leases", secret, srv.Addr))
	if _, err := wrong.Get(ctxFor(t), "k"); err == nil || !strings.Contains(err.Error(), "Authorization Violation") {
		t.Errorf("Get with a wrong password: %v, want the server's refusal", err)
	}
	down := storetest.OpenClosing(t, nats.Open, fmt.Sprintf("nats://tenure:%s@127.0.0.1:%d/leases", secret, testserver.FreePort(t)))
	if _, err := down.Get(ctxFor(t), "k"); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Get with the server down: %v, want the dial's error", err)
	}
	storetest.ServerDown(t, secret, func(hostport string) tenure.Store {
		return storetest.OpenClosing(t, nats.Open, fmt.Sprintf("nats://u:%s@%s/leases", secret, hostport))
	})
}

func TestInvalidURLs(t *testing.T) {
	storetest.InvalidURLs(t, "pw", tenure.Open,
		"nats://u:pw@127.0.0.1:4222",
		"nats://u:pw@127.0.0.1:4222/",
		"nats://u:pw@127.0.0.1:4222/a/b/c",
		"nats://u:pw@127.0.0.1:4222/bad.bucket",
		"nats://u:pw@127.0.0.1:4222/b/bad.prefix",
		"nats://u:pw@127.0.0.1/b",
		"nats://u:pw@127.0.0.1:4222,host/b",
		"nats://u:pw@127.0.0.1:4222/b?x=1",
		"nats:u:pw@127.0.0.1:4222/b",
	)
}

// A watch ends when the connection is lost, so its caller reads and
// watches again, and calls fail within the connect wait (2 s) rather than
// hang until their ctx; after the server is back the grant is still there.
func TestOutage(t *testing.T) {
	srv := natstest.Start(t)
	st := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	key := storetest.Key(t)
	var stopped time.Time
	l := storetest.Outage(t, st, key, func() error { srv.Stop(); stopped = time.Now(); return nil })
	// A call in flight when the connection went would otherwise wait for
	// its ctx (30 s here).
	if d := time.Since(stopped); d > 10*time.Second {
		t.Fatalf("the outage took %s to be noticed", d)
	}
	srv.Start(t)
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if err = st.Renew(ctxFor(t), l); err == nil {
			return
		}
	}
	t.Fatalf("Renew after the server came back: %v", err)
}

// A grant written from outside without a server TTL ends by observation
// (this Store saw it unchanged for its TTL), and a watch reports that
// although no message announces it.
func TestGrantWithoutTTLEndsForWatchers(t *testing.T) {
	srv := natstest.Start(t)
	a := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	key := storetest.Key(t)
	if _, err := a.Get(ctxFor(t), key); err != nil { // makes the bucket
		t.Fatal(err)
	}
	if _, err := bucket(t, srv, "leases").Put(ctxFor(t), natsKey(t, key), []byte(`{"holder":"mallory","ttl_ns":1000000000}`)); err != nil {
		t.Fatal(err)
	}
	ch, err := a.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, time.Second, "mallory's grant", func(r tenure.Record) bool { return r.Holder == "mallory" })
	storetest.Await(t, ch, 3*time.Second, "its end", func(r tenure.Record) bool { return !r.Held() })
	sent := time.Now()
	l, err := a.Acquire(ctxFor(t), key, "alpha", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if time.Until(sent.Add(l.Wait)) < 900*time.Millisecond {
		t.Fatalf("the grant after one written from outside has Wait %s, want its TTL of 1s", l.Wait)
	}
}

// A grant rewritten from outside with a longer server TTL than its own
// (a copy published with Nats-TTL 1h) is no longer its holder's, and ends
// after its own TTL by observation rather than after an hour.
func TestGrantStretchedFromOutsideEnds(t *testing.T) {
	srv := natstest.Start(t)
	a := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	key := storetest.Key(t)
	l, err := a.Acquire(ctxFor(t), key, "alpha", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e, err := bucket(t, srv, "leases").Get(ctxFor(t), natsKey(t, key))
	if err != nil {
		t.Fatal(err)
	}
	js := plainJS(t, srv)
	if _, err := js.Publish(ctxFor(t), "$KV.leases."+natsKey(t, key), e.Value(), jetstream.WithMsgTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctxFor(t), l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew of a grant stretched from outside: %v, want ErrLost", err)
	}
	ch, err := a.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, 3*time.Second, "the stretched grant's end", func(r tenure.Record) bool { return !r.Held() })
}
