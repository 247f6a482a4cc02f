package faultstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/tenurehq/tenure"
)

// Store is a [tenure.Store] whose calls go through a [Faults] before and
// after reaching the inner store. Make it with [Wrap].
type Store struct {
	inner  tenure.Store
	faults *Faults
	closed atomic.Bool
}

var _ tenure.Store = (*Store)(nil)

// Wrap returns inner behind f. If inner is a [tenure.Publisher] so is the
// result: its AcquireClaim goes through f as Acquire does. If inner is also
// a [tenure.SessionStore] so is the result, its sessions' calls going
// through f too. If inner is a [tenure.StepDowner] so is the result, its
// RequestStepDown going through f as Acquire does.
func Wrap(inner tenure.Store, f *Faults) tenure.Store {
	s := &Store{inner: inner, faults: f}
	sd, steps := inner.(tenure.StepDowner)
	p, ok := inner.(tenure.Publisher)
	if !ok {
		if steps {
			return &stepDownStore{s, stepDowner{s, sd}}
		}
		return s
	}
	w := &publisher{Store: s, inner: p}
	if ss, ok := inner.(tenure.SessionStore); ok {
		sp := &sessionPublisher{publisher: w, inner: ss}
		if steps {
			return &stepDownSessionPublisher{sp, stepDowner{s, sd}}
		}
		return sp
	}
	if steps {
		return &stepDownPublisher{w, stepDowner{s, sd}}
	}
	return w
}

// stepDowner forwards the [tenure.StepDowner] ability of a wrapped store.
type stepDowner struct {
	s  *Store
	sd tenure.StepDowner
}

// RequestStepDown implements [tenure.StepDowner], with the faults of
// Acquire.
func (d stepDowner) RequestStepDown(ctx context.Context, key string, req tenure.StepDownRequest) (tenure.StepDown, error) {
	return value(ctx, d.s, OpAcquire, func() (tenure.StepDown, error) { return d.sd.RequestStepDown(ctx, key, req) })
}

// The wrappers of a StepDowner, one per combination of the other abilities.
type (
	stepDownStore struct {
		*Store
		stepDowner
	}
	stepDownPublisher struct {
		*publisher
		stepDowner
	}
	stepDownSessionPublisher struct {
		*sessionPublisher
		stepDowner
	}
)

var (
	_ tenure.StepDowner   = (*stepDownStore)(nil)
	_ tenure.Publisher    = (*stepDownPublisher)(nil)
	_ tenure.StepDowner   = (*stepDownPublisher)(nil)
	_ tenure.SessionStore = (*stepDownSessionPublisher)(nil)
	_ tenure.StepDowner   = (*stepDownSessionPublisher)(nil)
)

// publisher is a Store around a [tenure.Publisher], keeping the ability.
type publisher struct {
	*Store
	inner tenure.Publisher
}

var _ tenure.Publisher = (*publisher)(nil)

// AcquireClaim implements [tenure.Publisher], with the faults of Acquire.
func (p *publisher) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	return value(ctx, p.Store, OpAcquire, func() (tenure.Lease, error) { return p.inner.AcquireClaim(ctx, key, c) })
}

// Acquire implements [tenure.Store].
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return value(ctx, s, OpAcquire, func() (tenure.Lease, error) { return s.inner.Acquire(ctx, key, identity, ttl) })
}

// Renew implements [tenure.Store].
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	return s.call(ctx, OpRenew, func() error { return s.inner.Renew(ctx, l) })
}

// Release implements [tenure.Store].
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	return s.call(ctx, OpRelease, func() error { return s.inner.Release(ctx, l) })
}

// Get implements [tenure.Store].
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	return value(ctx, s, OpGet, func() (tenure.Record, error) { return s.inner.Get(ctx, key) })
}

// Close implements [tenure.Store]; it closes the inner store, without
// faults. Later calls return [tenure.ErrClosed] at once, before any fault
// or the state of their context, as a store's own calls after Close do.
func (s *Store) Close() error {
	s.closed.Store(true)
	return s.inner.Close()
}

// call runs do through the plan for op, unless s is closed.
func (s *Store) call(ctx context.Context, op Op, do func() error) error {
	if s.closed.Load() {
		return tenure.ErrClosed
	}
	return s.faults.call(ctx, op, do)
}

// value is [Store.call] for a call that returns a value.
func value[T any](ctx context.Context, s *Store, op Op, do func() (T, error)) (T, error) {
	if s.closed.Load() {
		var zero T
		return zero, tenure.ErrClosed
	}
	return callValue(ctx, s.faults, op, do)
}

// Watch implements [tenure.Reader]. Setting up the watch goes through the
// plan like any call; afterwards a partition closes the channel and a pause
// holds deliveries until Resume.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	innerCtx, cancel := context.WithCancel(ctx)
	in, err := value(ctx, s, OpWatch, func() (<-chan tenure.Record, error) { return s.inner.Watch(innerCtx, key) })
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
func (s *Store) forward(ctx context.Context, cancel context.CancelFunc, in <-chan tenure.Record, out chan<- tenure.Record) {
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

// ErrNoWatch is the error of Watch on a store made by [PollOnly].
var ErrNoWatch = fmt.Errorf("%w: watch disabled by faultstore.PollOnly", tenure.ErrUnavailable)

// PollOnly returns s with a Watch that always fails with [ErrNoWatch], so
// electors and observers on it poll, as they do while a store cannot watch.
// It keeps s's [tenure.Publisher] and [tenure.SessionStore] abilities and
// no other: s's [tenure.Defaulter], [tenure.TTLRanger] and
// [tenure.StepDowner] are hidden, so use it on stores without them, such
// as the memory and local stores.
func PollOnly(s tenure.Store) tenure.Store {
	p, ok := s.(tenure.Publisher)
	if !ok {
		return pollOnly{s}
	}
	if ss, ok := s.(tenure.SessionStore); ok {
		return pollOnlySessions{pollOnlyPublisher{pollOnly{s}, p}, ss}
	}
	return pollOnlyPublisher{pollOnly{s}, p}
}

type pollOnlySessions struct {
	pollOnlyPublisher
	ss tenure.SessionStore
}

func (p pollOnlySessions) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	return p.ss.OpenSession(ctx, ttl)
}

type pollOnly struct{ tenure.Store }

type pollOnlyPublisher struct {
	pollOnly
	p tenure.Publisher
}

func (p pollOnlyPublisher) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	return p.p.AcquireClaim(ctx, key, c)
}

func (pollOnly) Watch(context.Context, string) (<-chan tenure.Record, error) {
	return nil, ErrNoWatch
}
func (p pollOnly) String() string { return fmt.Sprintf("PollOnly(%T)", p.Store) }

// A wrapper never drops an ability of the store it wraps: Store answers
// each optional interface of package tenure with the inner store's answer,
// or with the answer that means "no preference" when the inner store lacks
// it, which is what a caller assumes of a store without the ability.
var (
	_ tenure.Defaulter      = (*Store)(nil)
	_ tenure.TTLRanger      = (*Store)(nil)
	_ tenure.PollingWatcher = (*Store)(nil)
)

// Defaults implements [tenure.Defaulter] with the inner store's defaults.
func (s *Store) Defaults() (identity string, ttl time.Duration) {
	if d, ok := s.inner.(tenure.Defaulter); ok {
		return d.Defaults()
	}
	return "", 0
}

// TTLRange implements [tenure.TTLRanger] with the inner store's range.
func (s *Store) TTLRange() (lo, hi time.Duration) {
	if r, ok := s.inner.(tenure.TTLRanger); ok {
		return r.TTLRange()
	}
	return 0, 0
}

// WatchPolls implements [tenure.PollingWatcher] with the inner store's
// answer.
func (s *Store) WatchPolls() bool {
	p, ok := s.inner.(tenure.PollingWatcher)
	return ok && p.WatchPolls()
}
