package faultstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tenurehq/tenure"
)

// Store is a [tenure.Store] whose calls go through a [Faults] before and
// after reaching the inner store. Make it with [Wrap].
type Store struct {
	inner  tenure.Store
	faults *Faults
}

// watchStore is a Store whose inner store can watch.
type watchStore struct {
	*Store
	watcher tenure.Watcher
}

var (
	_ tenure.Store   = (*Store)(nil)
	_ tenure.Watcher = (*watchStore)(nil)
)

// Wrap returns inner behind f. The result is a [tenure.Watcher] exactly when
// inner is one, so an elector finds the same abilities it would find on
// inner.
func Wrap(inner tenure.Store, f *Faults) tenure.Store {
	s := &Store{inner: inner, faults: f}
	if w, ok := inner.(tenure.Watcher); ok {
		return &watchStore{Store: s, watcher: w}
	}
	return s
}

// Acquire implements [tenure.Store].
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	var l tenure.Lease
	err := s.faults.call(ctx, OpAcquire, func() (err error) {
		l, err = s.inner.Acquire(ctx, key, identity, ttl)
		return err
	})
	if err != nil {
		return tenure.Lease{}, err
	}
	return l, nil
}

// Renew implements [tenure.Store].
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	return s.faults.call(ctx, OpRenew, func() error { return s.inner.Renew(ctx, l) })
}

// Release implements [tenure.Store].
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	return s.faults.call(ctx, OpRelease, func() error { return s.inner.Release(ctx, l) })
}

// Get implements [tenure.Store].
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	var r tenure.Record
	err := s.faults.call(ctx, OpGet, func() (err error) {
		r, err = s.inner.Get(ctx, key)
		return err
	})
	if err != nil {
		return tenure.Record{}, err
	}
	return r, nil
}

// Close implements [tenure.Store]; it closes the inner store, without faults.
func (s *Store) Close() error { return s.inner.Close() }

// Watch implements [tenure.Watcher]. Setting up the watch goes through the
// plan like any call; afterwards a partition closes the channel and a pause
// holds deliveries until Resume.
func (s *watchStore) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	innerCtx, cancel := context.WithCancel(ctx)
	var in <-chan tenure.Record
	err := s.faults.call(ctx, OpWatch, func() (err error) {
		in, err = s.watcher.Watch(innerCtx, key)
		return err
	})
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan tenure.Record)
	go s.forward(innerCtx, cancel, in, out)
	return out, nil
}

// forward copies deliveries from in to out until ctx is done, in closes, or
// a partition begins.
func (s *watchStore) forward(ctx context.Context, cancel context.CancelFunc, in <-chan tenure.Record, out chan<- tenure.Record) {
	defer close(out)
	defer cancel()
	f := s.faults
	for {
		f.mu.Lock()
		mode, changed := f.partition, f.changed
		f.mu.Unlock()
		if mode != Healthy {
			f.note(OpWatch, "watch-cut")
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case r, ok := <-in:
			if !ok {
				return
			}
			if err := f.gate(ctx, OpWatch); err != nil {
				if ctx.Err() == nil {
					f.note(OpWatch, "watch-cut")
				}
				return
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}
}

// PollOnly returns s without its optional abilities: only the methods of
// [tenure.Store], so callers that look for [tenure.Watcher] poll instead.
func PollOnly(s tenure.Store) tenure.Store { return pollOnly{s} }

type pollOnly struct{ s tenure.Store }

func (p pollOnly) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	return p.s.Acquire(ctx, key, id, ttl)
}
func (p pollOnly) Renew(ctx context.Context, l tenure.Lease) error   { return p.s.Renew(ctx, l) }
func (p pollOnly) Release(ctx context.Context, l tenure.Lease) error { return p.s.Release(ctx, l) }
func (p pollOnly) Get(ctx context.Context, key string) (tenure.Record, error) {
	return p.s.Get(ctx, key)
}
func (p pollOnly) Close() error   { return p.s.Close() }
func (p pollOnly) String() string { return fmt.Sprintf("PollOnly(%T)", p.s) }
