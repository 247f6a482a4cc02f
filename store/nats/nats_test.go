package nats_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenurehq/tenure/internal/testserver/natstest"
	"github.com/tenurehq/tenure/store/nats"
	"github.com/tenurehq/tenure/storetest"
)

// ctxFor bounds a test's call by 30 s.
func ctxFor(t testing.TB) context.Context { return storetest.Context(t, 30*time.Second) }

// bucket returns a plain client's handle on the bucket of srv, for
// looking behind the store; the store must have made it already.
func bucket(t testing.TB, srv *natstest.Server, name string) jetstream.KeyValue {
	t.Helper()
	kv, err := plainJS(t, srv).KeyValue(ctxFor(t), name)
	if err != nil {
		t.Fatalf("bucket %s: %v", name, err)
	}
	return kv
}

// natsKey is the NATS key of key's grant under the default prefix.
func natsKey(t testing.TB, key string) string {
	t.Helper()
	st, err := nats.Open(context.Background(), "nats://127.0.0.1:1/x")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	return st.NATSKey(key)
}

// tamperOn changes the grants of bucket name on srv with a plain client.
func tamperOn(srv *natstest.Server, name string) *storetest.Tamper {
	return &storetest.Tamper{
		DeleteGrant: func(t testing.TB, key string) {
			if err := bucket(t, srv, name).Delete(ctxFor(t), natsKey(t, key)); err != nil {
				t.Fatal(err)
			}
		},
		OverwriteGrant: func(t testing.TB, key, identity string) {
			kv := bucket(t, srv, name)
			e, err := kv.Get(ctxFor(t), natsKey(t, key))
			if err != nil {
				t.Fatal(err)
			}
			var g map[string]any
			if err := json.Unmarshal(e.Value(), &g); err != nil {
				t.Fatal(err)
			}
			if g["term"] == nil {
				g["term"] = e.Revision()
			}
			g["holder"], g["token"] = identity, "forged"
			b, _ := json.Marshal(g)
			if _, err := kv.Put(ctxFor(t), natsKey(t, key), b); err != nil {
				t.Fatal(err)
			}
		},
		DeleteAll: func(t testing.TB, key string) {
			kv := bucket(t, srv, name)
			for _, k := range []string{natsKey(t, key), natsKey(t, key) + ".w"} {
				if err := kv.Purge(ctxFor(t), k); err != nil {
					t.Fatal(err)
				}
			}
		},
	}
}

func TestConformance(t *testing.T) {
	srv := natstest.Start(t)
	storetest.Run(t, storetest.Options{
		Open:    storetest.OpenURL(srv.URL("leases")),
		Restart: srv.Restart,
		Tamper:  tamperOn(srv, "leases"),
	})
}

// plainJS returns a plain JetStream client on srv.
func plainJS(t testing.TB, srv *natstest.Server) jetstream.JetStream {
	t.Helper()
	opts := []natsgo.Option{}
	if srv.User != "" {
		opts = append(opts, natsgo.UserInfo(srv.User, srv.Password))
	}
	nc, err := natsgo.Connect("nats://"+srv.Addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}
