package nats

import (
	"context"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/testserver/natstest"
	"github.com/tenurehq/tenure/storetest"
)

// openInternal opens a Store on a fresh server, closed by t.Cleanup, and
// a context for the test's calls.
func openInternal(t *testing.T) (*Store, context.Context) {
	t.Helper()
	srv := natstest.Start(t)
	st, err := Open(context.Background(), srv.URL("leases"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, storetest.Context(t, 30*time.Second)
}

// A renewal by the Store that made the grant is one request: a write
// conditional on its own last write's sequence.
func TestRenewIsOneRequest(t *testing.T) {
	st, ctx := openInternal(t)
	l, err := st.Acquire(ctx, "k", "alpha", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		before := st.nc.Stats().OutMsgs
		if err := st.Renew(ctx, l); err != nil {
			t.Fatal(err)
		}
		if n := st.nc.Stats().OutMsgs - before; n != 1 {
			t.Fatalf("a renewal sent %d messages, want 1", n)
		}
	}
	before := st.nc.Stats().OutMsgs
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	if n := st.nc.Stats().OutMsgs - before; n != 1 {
		t.Fatalf("a release sent %d messages, want 1", n)
	}
}

// A watch of the Store may read a new grant between Acquire's write and
// its reply: Acquire must not then take the grant's own term for one
// seen before and refuse it (TermCounterDeletedFromOutside failed so, one
// run in about ten, as "the bucket gave term 99, not above term 99").
func TestGrantReadByAWatchBeforeAcquireReturns(t *testing.T) {
	st, ctx := openInternal(t)
	afterGrant = func(s *Store, key string) {
		if r, err := s.Get(ctx, key); err != nil || !r.Held() {
			t.Errorf("Get right after the grant: %+v, %v", r, err)
		}
	}
	t.Cleanup(func() { afterGrant = nil })
	if _, err := st.Acquire(ctx, "k", "alpha", 5*time.Second); err != nil {
		t.Fatalf("Acquire with its grant read by a watch before it returned: %v", err)
	}
}
