package memory_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
	"github.com/tenurehq/tenure/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	shared := memory.New(nil)
	storetest.Run(t, storetest.Options{
		Open: func(testing.TB) tenure.Store { return &handle{s: shared} },
	})
}

// handle is one client's view of a shared store, as a connection to a
// server would be: closing it closes the handle, not the store.
type handle struct {
	s      *memory.Store
	closed atomic.Bool
}

func (h *handle) ok() error {
	if h.closed.Load() {
		return tenure.ErrClosed
	}
	return nil
}

func (h *handle) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	if err := h.ok(); err != nil {
		return tenure.Lease{}, err
	}
	return h.s.Acquire(ctx, key, id, ttl)
}

func (h *handle) Renew(ctx context.Context, l tenure.Lease) error {
	if err := h.ok(); err != nil {
		return err
	}
	return h.s.Renew(ctx, l)
}

func (h *handle) Release(ctx context.Context, l tenure.Lease) error {
	if err := h.ok(); err != nil {
		return err
	}
	return h.s.Release(ctx, l)
}

func (h *handle) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := h.ok(); err != nil {
		return tenure.Record{}, err
	}
	return h.s.Get(ctx, key)
}

func (h *handle) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := h.ok(); err != nil {
		return nil, err
	}
	return h.s.Watch(ctx, key)
}

func (h *handle) Close() error { h.closed.Store(true); return nil }

func TestCloseEndsWatches(t *testing.T) {
	s := memory.New(nil)
	ch, err := s.Watch(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	<-ch // the initial record
	s.Close()
	for range ch {
	}
	if _, err := s.Get(context.Background(), "k"); err != tenure.ErrClosed {
		t.Fatalf("Get after Close: %v", err)
	}
}

func BenchmarkFailover(b *testing.B) {
	shared := memory.New(nil)
	storetest.BenchFailover(b, storetest.BenchOptions{
		Open:   func(testing.TB) tenure.Store { return &handle{s: shared} },
		TTL:    500 * time.Millisecond,
		Trials: 20,
	})
}
