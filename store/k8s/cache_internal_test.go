package k8s

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
)

// TestWatchEventDuringCachedRead: a watch event stores a Lease version in
// the handle's cache at any moment, here just as Acquire or Renew took a
// stale version from it. They must still read the Lease again rather than
// answer from the stale version: Acquire right after the holder released
// refused with HeldError, and Renew of a live grant failed with ErrLost,
// which steps its leader down.
func TestWatchEventDuringCachedRead(t *testing.T) {
	srv := testserver.Kube(t)
	raw := "k8s://default/cache-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "?kubeconfig=" + url.QueryEscape(srv.Kubeconfig(t, srv.AdminToken))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() *Store {
		st, err := Open(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	holder, subject := open(), open()
	// A watch event arriving while a cached version is in use: another
	// object (a copy) takes its place in the cache.
	afterCachedRead = func(s *Store, name string) {
		if s == subject {
			if l := s.cached(name); l != nil {
				s.last.Store(name, l.DeepCopy())
			}
		}
	}
	t.Cleanup(func() { afterCachedRead = nil })

	l, err := holder.Acquire(ctx, "k", "alpha", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := subject.Get(ctx, "k"); err != nil || r.Holder != "alpha" {
		t.Fatalf("Get = %+v, %v; want alpha's grant (now in the subject's cache)", r, err)
	}
	if err := holder.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	l2, err := subject.Acquire(ctx, "k", "beta", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after alpha released, with alpha's grant cached: %v", err)
	}

	// The subject holds the key; its cache now has a version from before
	// its grant (a late watch event), not holding it.
	old := subject.cached(subject.LeaseName("k")).DeepCopy()
	old.Spec.HolderIdentity = new(string)
	subject.last.Store(subject.LeaseName("k"), old)
	if err := subject.Renew(ctx, l2); err != nil {
		t.Fatalf("Renew of the live grant, with an old version cached: %v (ErrLost: %v)", err, errors.Is(err, tenure.ErrLost))
	}
}
