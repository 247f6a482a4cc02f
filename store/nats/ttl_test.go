package nats_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver/natstest"
	"github.com/tenurehq/tenure/store/nats"
	"github.com/tenurehq/tenure/storetest"
)

// TestServerTTLPrecision measures, from outside the store, when the server
// deletes an entry written with a per-message TTL of 2 s and of 1.5 s:
// the package documentation states what it finds.
func TestServerTTLPrecision(t *testing.T) {
	srv := natstest.Start(t)
	js := plainJS(t, srv)
	kv, err := js.CreateKeyValue(ctxFor(t), jetstream.KeyValueConfig{Bucket: "ttl", History: 1, LimitMarkerTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []time.Duration{2 * time.Second, 1500 * time.Millisecond, 2 * time.Second, 2 * time.Second} {
		w, err := kv.Watch(ctxFor(t), "k", jetstream.UpdatesOnly())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := kv.Create(ctxFor(t), "k", []byte("v"), jetstream.KeyTTL(ttl)); err != nil {
			t.Fatal(err)
		}
		var gone time.Duration
		for gone == 0 {
			select {
			case e := <-w.Updates():
				if e != nil && e.Operation() != jetstream.KeyValuePut {
					gone = time.Since(start)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("TTL %s: the entry was not deleted within 10s", ttl)
			}
		}
		_ = w.Stop()
		t.Logf("TTL %s: deleted after %s", ttl, gone)
		// The server keeps TTLs in whole seconds, truncated: 1.5 s is 1 s.
		if want := ttl.Truncate(time.Second); gone < want || gone > want+500*time.Millisecond {
			t.Errorf("TTL %s: deleted after %s, want within 500ms after %s", ttl, gone, want)
		}
	}
}

// A grant's TTL is rounded up to whole seconds on the server: written as
// it is, a TTL of 1.5 s would end on the server after 1 s, while its
// holder still leads, and another candidate would take the key.
func TestGrantNeverEndsBeforeItsTTL(t *testing.T) {
	srv := natstest.Start(t)
	a := storetest.OpenClosing(t, nats.Open, srv.URL("leases"))
	key := storetest.Key(t)
	ch, err := a.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, time.Second, "the free key", func(r tenure.Record) bool { return !r.Held() })
	sent := time.Now()
	if _, err := a.Acquire(ctxFor(t), key, "alpha", 1500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, time.Second, "the grant", func(r tenure.Record) bool { return r.Held() })
	storetest.Await(t, ch, 3*time.Second, "the expiry", func(r tenure.Record) bool { return !r.Held() })
	if d := time.Since(sent); d < 1500*time.Millisecond {
		t.Fatalf("a grant of TTL 1.5s ended on the server after %s", d)
	}
}

// With a history above 1 the server raises every per-message TTL to the
// bucket's LimitMarkerTTL: why the store refuses such a bucket.
func TestServerStretchesTTLsWithHistory(t *testing.T) {
	srv := natstest.Start(t)
	js := plainJS(t, srv)
	kv, err := js.CreateKeyValue(ctxFor(t), jetstream.KeyValueConfig{Bucket: "hist", History: 5, LimitMarkerTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctxFor(t), "k", []byte("v"), jetstream.KeyTTL(time.Second)); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctxFor(t), "KV_hist")
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(ctxFor(t), "$KV.hist.k")
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Header.Get("Nats-TTL"); got != "3600" {
		t.Fatalf("an entry written with TTL 1s in a bucket of history 5 kept Nats-TTL %q, want it raised to 3600 (LimitMarkerTTL)", got)
	}
}
