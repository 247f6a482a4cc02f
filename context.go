package tenure

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// termKey is the context key of a leader context's [Term].
type termKey struct{}

// Term is a leader's handle on its own term, carried by its leader context
// (see [TermFrom]): the lease, the deadline by which the elector cancels
// the context at the latest, and renewals as they happen. It is how code
// outside the elector (a supervisor of a child process, metrics) follows
// the elector's own timeline instead of recomputing it. Safe for
// concurrent use.
type Term struct {
	lease    Lease
	clock    Clock
	base     time.Time    // when the task started, on clock
	progress atomic.Int64 // time of the last Progress, as nanoseconds since base

	mu       sync.Mutex
	deadline time.Time
	renewed  chan struct{}
}

func newTerm(l Lease, clock Clock, base, deadline time.Time) *Term {
	return &Term{lease: l, clock: clock, base: base, deadline: deadline, renewed: make(chan struct{}, 1)}
}

// TermFrom returns the term of the leader context ctx (or a context
// derived from it) and true, or false if ctx is not a leader context
// (nil included).
func TermFrom(ctx context.Context) (*Term, bool) {
	if ctx == nil {
		return nil, false
	}
	t, ok := ctx.Value(termKey{}).(*Term)
	return t, ok
}

// Lease returns the term's lease.
func (t *Term) Lease() Lease { return t.lease }

// Deadline returns when the elector cancels the leader context at the
// latest unless another renewal succeeds first: the time the last
// successful renewal (or the acquisition) was sent plus
// [Config.RenewDeadline], on the elector's clock. It only moves forward,
// and always ends before the store can grant the key to anyone else.
func (t *Term) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

// Renewed returns a channel that receives after a successful renewal moved
// [Term.Deadline] forward. Deliveries coalesce (read Deadline for the
// latest); the channel is never closed, so select on it with the leader
// context's Done.
func (t *Term) Renewed() <-chan struct{} { return t.renewed }

// extend moves the deadline forward to d and signals Renewed.
func (t *Term) extend(d time.Time) {
	t.mu.Lock()
	if d.After(t.deadline) {
		t.deadline = d
	}
	t.mu.Unlock()
	select {
	case t.renewed <- struct{}{}:
	default:
	}
}

// LeaseFrom returns the lease of the leader context ctx (or a context derived
// from it) and true, or false if ctx is not a leader context. Pass
// lease.Term with every write to the protected resource; see [Lease.Term].
func LeaseFrom(ctx context.Context) (Lease, bool) {
	t, ok := TermFrom(ctx)
	if !ok {
		return Lease{}, false
	}
	return t.lease, true
}

// Progress tells the elector that the leader task behind ctx is making
// progress. With [Config.StallTimeout] set, a task that does not call it at
// least that often is considered stalled and loses leadership. Calling it
// with a context that is not a leader context does nothing. It never blocks
// and is safe for concurrent use.
func Progress(ctx context.Context) {
	if t, ok := TermFrom(ctx); ok {
		t.progress.Store(int64(t.clock.Now().Sub(t.base)))
	}
}

func (t *Term) lastProgress() time.Time {
	return t.base.Add(time.Duration(t.progress.Load()))
}
