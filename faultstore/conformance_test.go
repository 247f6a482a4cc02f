package faultstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
	"github.com/tenurehq/tenure/storetest"
)

// With no faults planned, the wrapper is invisible: it passes the
// conformance suite, watch included.
func TestConformanceWithoutFaults(t *testing.T) {
	t.Parallel()
	shared := memory.New(nil)
	f := faultstore.New(faultstore.Plan{Seed: 1})
	storetest.Run(t, storetest.Options{
		Open: func(testing.TB) tenure.Store { return faultstore.Wrap(&handle{s: shared}, f) },
	})
}

// handle is one client's view of the shared store: closing it closes the
// handle, not the store.
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
