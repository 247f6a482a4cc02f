package etcd_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver/etcdtest"
	"github.com/tenurehq/tenure/storetest"
)

// A grant of a hypothetical newer format (a format field this build does
// not know, the holder under another name, a term key of another shape)
// on a live etcd lease reads as held, by "(unknown)", at a term no lower
// than the holder key's revision; after it ends the next grant's term is
// above it. The store needs no format marker for this: a holder key is
// held while it exists (its etcd lease judges it) and terms are
// revisions, so no field can make a key look free or its term go back.
func TestNewerFormatGrantHeld(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 10*time.Second)
	lease, err := raw.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	put, err := raw.Put(ctx, "/newer/holder/k", `{"format":99,"owner":"v99","ttl":"30s"}`, clientv3.WithLease(lease.ID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Put(ctx, "/newer/term/k", `{"format":99,"last":{"rev":1}}`); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, srv, "/newer")
	_, err = st.Acquire(ctx, "k", "older", time.Second)
	var held *tenure.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "(unknown)" || held.Record.Term < uint64(put.Header.Revision) {
		t.Fatalf("Acquire over a newer-format grant: %v; want HeldError naming (unknown) at term >= %d", err, put.Header.Revision)
	}
	r, err := st.Get(ctx, "k")
	if err != nil || !r.Held() || r.Term < uint64(put.Header.Revision) {
		t.Fatalf("Get of a newer-format grant: %+v, %v; want held at term >= %d", r, err, put.Header.Revision)
	}
	if _, err := raw.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	l, err := st.Acquire(ctx, "k", "older", time.Second)
	if err != nil || l.Term <= r.Term {
		t.Fatalf("Acquire once the newer grant ended: %+v, %v; want a term above %d", l, err, r.Term)
	}
}

// TestRecordFieldsPinned pins the JSON fields of a grant's holder key and
// of its term key. If it fails, the record changed: builds already
// deployed read it (a rolling upgrade runs both on one cluster), and no
// field may make them see a live grant as free or a term lower (see
// TestNewerFormatGrantHeld); update the lists once that is so.
func TestRecordFieldsPinned(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	ctx := storetest.Context(t, 10*time.Second)
	st := openStore(t, srv, "/pinned")
	if _, err := st.AcquireClaim(ctx, "k", tenure.Claim{Identity: "alpha", TTL: time.Second, Value: "v"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"/pinned/holder/k": "holder ttl_ns value",
		"/pinned/term/k":   "holder lease ttl_ns",
	} {
		resp, err := raw.Get(ctx, name)
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("get %s: %v", name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(resp.Kvs[0].Value, &m); err != nil {
			t.Fatal(err)
		}
		fields := slices.Sorted(maps.Keys(m))
		if got := strings.Join(fields, " "); got != want {
			t.Errorf("fields of %s: %s, want %s", name, got, want)
		}
	}
}
