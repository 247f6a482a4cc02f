package faultstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
)

// ErrInjected is wrapped by every error the wrapper makes up.
var ErrInjected = errors.New("faultstore: injected fault")

// Op names a store operation, for [Rates.Ops].
type Op uint8

// The operations of [tenure.Store] and [tenure.Reader].
const (
	OpAcquire Op = 1 << iota
	OpRenew
	OpRelease
	OpGet
	OpWatch
	// OpAll is every operation.
	OpAll = OpAcquire | OpRenew | OpRelease | OpGet | OpWatch
)

func (o Op) String() string {
	switch o {
	case OpAcquire:
		return "Acquire"
	case OpRenew:
		return "Renew"
	case OpRelease:
		return "Release"
	case OpGet:
		return "Get"
	case OpWatch:
		return "Watch"
	}
	return fmt.Sprintf("Op(%#x)", uint8(o))
}

// Rates are the per-call fault probabilities, each in [0, 1], and a base
// latency. For every call the decisions are drawn in this order: fail
// before, delay before, fail after, delay after, latency. A call that fails
// before reaches nothing else.
type Rates struct {
	// Ops are the operations the rates apply to; zero means [OpAll].
	Ops Op
	// FailBefore is the probability that a call fails without reaching the
	// inner store: the store did not apply it.
	FailBefore float64
	// FailAfter is the probability that a call the inner store applied
	// returns an error anyway (a reply lost on the way back): the caller
	// cannot tell whether it took effect.
	FailAfter float64
	// DelayBefore is the probability that a call waits, uniformly up to
	// MaxDelay, before reaching the inner store (a slow request).
	DelayBefore float64
	// DelayAfter is the probability that the reply waits, uniformly up to
	// MaxDelay, after the inner store applied the call (a late reply). If
	// the caller's context is done first, the caller gets its error although
	// the call was applied.
	DelayAfter float64
	// MaxDelay bounds each delay.
	MaxDelay time.Duration
	// Latency, if positive, delays every call by a uniform time in
	// [0, Latency) before it reaches the inner store, like a network
	// round trip. Besides realism it breaks ties: calls that several
	// goroutines make at the same virtual instant reach the store in an
	// order drawn from the seed rather than one left to the scheduler.
	Latency time.Duration
}

// Plan configures a [Faults].
type Plan struct {
	// Seed seeds the per-call decisions. Each operation draws from a
	// stream of its own, so calls of different operations made at the
	// same instant get the same decisions whichever arrives first (a
	// simulation replayed under another goroutine schedule stays the
	// same: an elector's background Release and its next Acquire race).
	Seed uint64
	// Clock measures delays. Default [tenure.SystemClock].
	Clock tenure.Clock
	// Rates are the initial fault rates; zero means no random faults.
	Rates Rates
	// OnFault, if set, is called for every fault injected, with the
	// operation and a short description; it must not block. Tests use it to
	// record a history.
	OnFault func(op Op, what string)
}

// PartitionMode says how calls behave during a partition.
type PartitionMode int

const (
	// Healthy: no partition.
	Healthy PartitionMode = iota
	// FailFast: calls fail at once with an error wrapping [ErrInjected]
	// (a refused connection).
	FailFast
	// Hang: calls wait until their context is done (packets dropped).
	Hang
)

// Faults is a fault plan with its switches. Its methods are safe for
// concurrent use and never block.
type Faults struct {
	clock   tenure.Clock
	onFault func(Op, string)

	mu        sync.Mutex
	seed      uint64
	rngs      map[Op]*rand.Rand // per operation; see Plan.Seed
	rates     Rates
	partition PartitionMode
	paused    bool
	changed   chan struct{} // closed and replaced on every switch change
	counts    map[string]int
}

// New returns a Faults following p.
func New(p Plan) *Faults {
	if p.Clock == nil {
		p.Clock = tenure.SystemClock
	}
	return &Faults{
		clock:   p.Clock,
		onFault: p.OnFault,
		seed:    p.Seed,
		rngs:    map[Op]*rand.Rand{},
		rates:   p.Rates,
		changed: make(chan struct{}),
		counts:  map[string]int{},
	}
}

// SetRates replaces the per-call fault rates; calls already past their
// decisions are not affected.
func (f *Faults) SetRates(r Rates) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rates = r
}

// Partition sets the partition mode. Leaving a partition (mode [Healthy])
// lets hanging calls proceed if their context is still live.
func (f *Faults) Partition(mode PartitionMode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.partition = mode
	f.signalLocked()
}

// Pause makes every new call, and every call waiting on an injected delay,
// wait for [Faults.Resume] (or its context) before going on.
func (f *Faults) Pause() { f.setPaused(true) }

// Resume ends a pause; the waiting calls proceed.
func (f *Faults) Resume() { f.setPaused(false) }

// Heal ends any partition and pause and sets all rates to zero: from now on
// calls pass through untouched (calls already inside an injected delay
// finish it).
func (f *Faults) Heal() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rates = Rates{}
	f.partition = Healthy
	f.paused = false
	f.signalLocked()
}

// Counts returns how many faults of each kind were injected, keyed by the
// description also given to [Plan.OnFault].
func (f *Faults) Counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[string]int, len(f.counts))
	for k, v := range f.counts {
		m[k] = v
	}
	return m
}

func (f *Faults) setPaused(p bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paused = p
	f.signalLocked()
}

func (f *Faults) signalLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// decision is what happens to one call.
type decision struct {
	failBefore, failAfter   bool
	delayBefore, delayAfter time.Duration
	latency                 time.Duration
}

// decide draws the decisions of one call from op's stream: always seven
// draws, whatever the rates, so the stream stays aligned with the
// sequence of op's calls.
func (f *Faults) decide(op Op) decision {
	f.mu.Lock()
	defer f.mu.Unlock()
	rng := f.rngs[op]
	if rng == nil {
		rng = rand.New(rand.NewPCG(f.seed, f.seed^0x9e3779b97f4a7c15^uint64(op)<<32))
		f.rngs[op] = rng
	}
	var u [7]float64
	for i := range u {
		u[i] = rng.Float64()
	}
	r := f.rates
	if r.Ops != 0 && r.Ops&op == 0 {
		return decision{}
	}
	var d decision
	d.failBefore = u[0] < r.FailBefore
	if u[1] < r.DelayBefore {
		d.delayBefore = time.Duration(u[2] * float64(r.MaxDelay))
	}
	d.failAfter = u[3] < r.FailAfter
	if u[4] < r.DelayAfter {
		d.delayAfter = time.Duration(u[5] * float64(r.MaxDelay))
	}
	d.latency = time.Duration(u[6] * float64(r.Latency))
	return d
}

func (f *Faults) note(op Op, what string) {
	f.mu.Lock()
	f.counts[what]++
	f.mu.Unlock()
	if f.onFault != nil {
		f.onFault(op, what)
	}
}

// gate waits while the switches forbid calls: it returns nil when the call
// may go on, an injected error for a fail-fast partition, or ctx's error.
func (f *Faults) gate(ctx context.Context, op Op) error {
	noted := ""
	for {
		if err := ctxerr.Err(ctx); err != nil {
			return err
		}
		f.mu.Lock()
		mode, paused, changed := f.partition, f.paused, f.changed
		f.mu.Unlock()
		var what string
		switch {
		case mode == FailFast:
			f.note(op, "partition-fail")
			return fmt.Errorf("%w: %s refused: partitioned from the store", ErrInjected, op)
		case mode == Hang:
			what = "partition-hang"
		case paused:
			what = "paused"
		default:
			return nil
		}
		if what != noted {
			f.note(op, what)
			noted = what
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wait sleeps d on the plan's clock, then passes the gate.
func (f *Faults) wait(ctx context.Context, op Op, d time.Duration) error {
	if err := f.sleep(ctx, d); err != nil {
		return err
	}
	return f.gate(ctx, op)
}

// sleep waits d on the plan's clock, or until ctx is done.
func (f *Faults) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := f.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// callValue is [Faults.call] for a store call that returns a value: the
// value do returned, or T's zero value with any error (also when do
// succeeded but its reply was lost).
func callValue[T any](ctx context.Context, f *Faults, op Op, do func() (T, error)) (T, error) {
	var v T
	err := f.call(ctx, op, func() (err error) {
		v, err = do()
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

// call runs one store call through the plan.
func (f *Faults) call(ctx context.Context, op Op, do func() error) error {
	d := f.decide(op)
	if d.delayBefore > 0 {
		f.note(op, "delay-before")
	}
	if err := f.wait(ctx, op, d.delayBefore); err != nil {
		return err
	}
	// Latency comes after the gate, so calls released together by the end
	// of a pause or partition still reach the store one by one.
	if err := f.sleep(ctx, d.latency); err != nil {
		return err
	}
	if d.failBefore {
		f.note(op, "fail-before")
		return fmt.Errorf("%w: %s failed before reaching the store", ErrInjected, op)
	}
	err := do()
	if d.delayAfter > 0 {
		f.note(op, "delay-after")
		if werr := f.wait(ctx, op, d.delayAfter); werr != nil {
			return werr // applied (or failed) at the store, but the reply is lost
		}
	}
	if err == nil && d.failAfter {
		f.note(op, "fail-after")
		return fmt.Errorf("%w: %s reply lost after the store applied it", ErrInjected, op)
	}
	return err
}
