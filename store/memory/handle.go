package memory

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/seen"
)

// Handle returns one client's view of s: it shares s's keys, and closing it
// ends only the view (later calls through it return [tenure.ErrClosed]),
// as closing one process's connection to a server would. Give each
// candidate of a test its own handle. Safe for concurrent use.
func (s *Store) Handle() tenure.Store { return &handle{s: s} }

type handle struct {
	s      *Store
	closed atomic.Bool
	seen   seen.Terms // what this handle saw, as one process would
}

var _ tenure.Publisher = (*handle)(nil)

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
	return h.s.acquire(ctx, key, tenure.Claim{Identity: id, TTL: ttl}, &h.seen)
}

func (h *handle) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	if err := h.ok(); err != nil {
		return tenure.Lease{}, err
	}
	return h.s.acquire(ctx, key, c, &h.seen)
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
	return h.s.get(ctx, key, &h.seen)
}

func (h *handle) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := h.ok(); err != nil {
		return nil, err
	}
	return h.s.watch(ctx, key, &h.seen)
}

// Close ends the view; the store and other handles are unaffected.
func (h *handle) Close() error { h.closed.Store(true); return nil }

var _ tenure.SessionStore = (*handle)(nil)

func (h *handle) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	if err := h.ok(); err != nil {
		return nil, err
	}
	return h.s.openSession(ctx, ttl, &h.seen)
}
