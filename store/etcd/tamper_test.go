package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver/etcdtest"
	"github.com/tenurehq/tenure/storetest"
)

// TestSessionGrantRewrittenOnItsLease: a session's holder key rewritten
// from outside while it stays attached to the session's lease, so that
// the list of attached keys does not show it: in place with `etcdctl put
// --ignore-lease` (an operator fixing its value keeps it on its lease) to
// name someone else, or deleted and put again by hand with `--lease` (a
// hand-replaced record, of the same value). Neither is the session's
// grant any more, and the next keep-alive must report both gone, and only
// them, as it does a holder key deleted or put without a lease; before,
// it reported nothing, and the session led on under a record naming
// another holder. The session's Release then leaves the records alone.
func TestSessionGrantRewrittenOnItsLease(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 20*time.Second)
	const prefix = "/onitslease"
	st := openStore(t, srv, prefix)
	ss, err := st.OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close(context.Background())
	leases := map[string]tenure.Lease{}
	for _, k := range []string{"rewritten", "replaced", "kept"} {
		if leases[k], err = ss.Acquire(ctx, k, "alpha", ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ss.KeepAlive(ctx); err != nil { // the session has checked the keys once
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, prefix+"/holder/rewritten", `{"holder":"mallory","ttl_ns":5000000000}`, clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	got, err := raw.Get(ctx, prefix+"/holder/replaced")
	if err != nil || len(got.Kvs) != 1 {
		t.Fatalf("Get of the holder key: %+v, %v", got, err)
	}
	kv := got.Kvs[0]
	if _, err := raw.Delete(ctx, string(kv.Key)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, string(kv.Key), string(kv.Value), clientv3.WithLease(clientv3.LeaseID(kv.Lease))); err != nil {
		t.Fatal(err)
	}
	gone, err := ss.KeepAlive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range gone {
		if l != leases[l.Key] {
			t.Fatalf("KeepAlive reported gone %+v, not a grant of the session", l)
		}
		seen[l.Key] = true
	}
	if len(gone) != 2 || !seen["rewritten"] || !seen["replaced"] {
		t.Fatalf("KeepAlive after two holder keys were rewritten on the session's lease reported gone %+v, want those two", gone)
	}
	if gone, err := ss.KeepAlive(ctx); err != nil || len(gone) != 0 {
		t.Fatalf("the next KeepAlive reported gone %+v, %v; want nothing", gone, err)
	}
	for _, k := range []string{"rewritten", "replaced"} {
		if err := ss.Release(ctx, leases[k]); !errors.Is(err, tenure.ErrLost) {
			t.Fatalf("Release of %q after it was rewritten: %v, want ErrLost", k, err)
		}
	}
	if r, err := st.Get(ctx, "rewritten"); err != nil || r.Holder != "mallory" {
		t.Fatalf("Get of the rewritten key after the old grant's Release = %+v, %v; want mallory's record", r, err)
	}
}

// TestSessionIdleKeepAliveReadsNoKeys: the keep-alive reads the holder
// keys changed since the last one (TestSessionGrantRewrittenOnItsLease)
// only when etcd's revision moved: an idle session's keep-alives, which
// write nothing, send no Range, so an idle session still costs two
// messages per keep-alive whatever its number of grants.
func TestSessionIdleKeepAliveReadsNoKeys(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := storetest.Context(t, 20*time.Second)
	ss, err := openStore(t, srv, "/idle").OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close(context.Background())
	for _, k := range []string{"a", "b"} {
		if _, err := ss.Acquire(ctx, k, "alpha", ""); err != nil {
			t.Fatal(err)
		}
	}
	keepAlive := func() {
		t.Helper()
		if gone, err := ss.KeepAlive(ctx); err != nil || len(gone) != 0 {
			t.Fatalf("KeepAlive: gone %+v, %v", gone, err)
		}
	}
	keepAlive() // reads the keys the two grants wrote
	before := rangesServed(t, srv)
	for range 5 {
		keepAlive()
	}
	if after := rangesServed(t, srv); after != before {
		t.Fatalf("5 idle keep-alives sent %d Range requests, want none", after-before)
	}
}

// TestSessionIdleKeepAliveListsNoKeys: while etcd's revision stays where
// the last keep-alive checked the grants, nothing can have deleted or
// rewritten a holder key, and a keep-alive does not list the keys
// attached to the lease: what etcd sends back for it does not grow with
// the number of grants (it listed every one, about 1.01 % of a core at
// 10,000 keys in bench/compare's TestScale, etcd's share included).
func TestSessionIdleKeepAliveListsNoKeys(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := storetest.Context(t, 60*time.Second)
	ss, err := openStore(t, srv, "/quiet").OpenSession(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close(context.Background())
	const grants = 200
	for i := range grants {
		if _, err := ss.Acquire(ctx, fmt.Sprintf("partition-%03d", i), "alpha", ""); err != nil {
			t.Fatal(err)
		}
	}
	if gone, err := ss.KeepAlive(ctx); err != nil || len(gone) != 0 {
		t.Fatalf("KeepAlive: gone %+v, %v", gone, err)
	}
	const sent = "etcd_network_client_grpc_sent_bytes_total"
	before := metric(t, srv, sent)
	const keepAlives = 5
	for range keepAlives {
		if gone, err := ss.KeepAlive(ctx); err != nil || len(gone) != 0 {
			t.Fatalf("KeepAlive: gone %+v, %v", gone, err)
		}
	}
	// One holder key is over 20 bytes: a list of 200 is over 4,000.
	if per := (metric(t, srv, sent) - before) / keepAlives; per > 500 {
		t.Fatalf("an idle keep-alive of %d grants got %d bytes from etcd, want under 500: it listed the keys", grants, per)
	}
}

// rangesServed is how many Range requests srv has answered, from its
// /metrics.
func rangesServed(t *testing.T, srv *etcdtest.Server) int {
	t.Helper()
	return metric(t, srv, `grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"}`)
}

// metric is the value of the metric named (with its labels) name in
// srv's /metrics.
func metric(t *testing.T, srv *etcdtest.Server, name string) int {
	t.Helper()
	resp, err := http.Get("http://" + srv.Endpoint + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %q: %v", line, err)
			}
			return int(n)
		}
	}
	t.Fatalf("etcd's /metrics has no %s", name)
	return 0
}
