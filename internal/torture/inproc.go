package torture

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
)

// InProcess is a [Driver] whose candidates are library electors in this
// process, each behind its own [faultstore] on a shared store. Kills cut a
// candidate off and stop it without releasing, as a crash would; partitions
// make its store calls fail; pauses make them hang.
type InProcess struct {
	StoreName string
	Open      func() (tenure.Store, error) // a new handle on the shared store
	N         int
	TTL       time.Duration
	Seed      int64

	mu    sync.Mutex
	steps int
	rec   *Recorder
	cands map[string]*candidate
	wg    sync.WaitGroup
}

type candidate struct {
	faults *faultstore.Faults
	clock  *steppedClock
	cancel context.CancelFunc
	done   chan struct{}
}

// Name implements [Driver].
func (d *InProcess) Name() string { return d.StoreName }

// Kinds implements [Driver].
func (d *InProcess) Kinds() []FaultKind {
	return []FaultKind{FaultKill, FaultPartition, FaultStop, FaultStoreErr, FaultClockStep}
}

// Start implements [Driver].
func (d *InProcess) Start(ctx context.Context, rec *Recorder) ([]string, error) {
	d.rec, d.cands = rec, map[string]*candidate{}
	var ids []string
	for i := range d.N {
		id := fmt.Sprintf("c%d", i+1)
		ids = append(ids, id)
		if err := d.launch(ctx, id, int64(i)); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func (d *InProcess) launch(ctx context.Context, id string, n int64) error {
	inner, err := d.Open()
	if err != nil {
		return err
	}
	f := faultstore.New(faultstore.Plan{Seed: uint64(d.Seed*100 + n)})
	clock := &steppedClock{}
	e, err := tenure.New(tenure.Config{
		Store: faultstore.Wrap(inner, f), Key: "torture", Identity: id, TTL: d.TTL, Clock: clock,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &candidate{faults: f, clock: clock, cancel: cancel, done: make(chan struct{})}
	d.mu.Lock()
	d.cands[id] = c
	d.mu.Unlock()
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(c.done)
		defer inner.Close()
		_ = e.Run(cctx, func(ctx context.Context) error {
			term, _ := tenure.TermFrom(ctx)
			l := term.Lease()
			ended := d.rec.Began(id, l.Term)
			defer ended()
			stepped := clock.off.Load()
			t := time.NewTicker(10 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					// Past the renew deadline, the elector cancelled on
					// time and this goroutine ran late; a clock step in
					// between would be counted in, so it is left out.
					if after := clock.Now().Sub(term.Deadline()); after > 0 && clock.off.Load() == stepped {
						d.rec.NoticedLate(id, l.Term, after)
					}
					return nil
				case <-t.C:
					d.rec.Ledger.Append(id, l.Term)
				}
			}
		})
	}()
	return nil
}

// Inject implements [Driver].
func (d *InProcess) Inject(ctx context.Context, kind FaultKind, target string) (func() error, bool, error) {
	d.mu.Lock()
	c := d.cands[target]
	d.mu.Unlock()
	if c == nil {
		return nil, false, fmt.Errorf("no candidate %q", target)
	}
	switch kind {
	case FaultKill:
		// A crash: the store stops hearing from it, nothing is released.
		c.faults.Partition(faultstore.FailFast)
		c.cancel()
		<-c.done
		var n int64
		fmt.Sscanf(target, "c%d", &n)
		return nil, false, d.launch(ctx, target, n+1000)
	case FaultPartition:
		c.faults.Partition(faultstore.FailFast)
		return func() error { c.faults.Heal(); return nil }, false, nil
	case FaultStop:
		c.faults.Pause()
		return func() error { c.faults.Resume(); return nil }, false, nil
	case FaultClockStep:
		// Steps alternate: forward (the elector sees time fly and steps
		// down early: within the assumptions) and backward (a monotonic
		// clock going back: outside them, fencing must hold).
		back := d.steps%2 == 1
		d.steps++
		step := d.TTL
		if back {
			step = -step
		}
		c.clock.step(step)
		return func() error { return nil }, back, nil
	case FaultStoreErr:
		c.faults.SetRates(faultstore.Rates{Ops: faultstore.OpAll, FailBefore: 0.3, FailAfter: 0.2, DelayBefore: 0.3, DelayAfter: 0.3, MaxDelay: d.TTL / 2})
		return func() error { c.faults.Heal(); return nil }, false, nil
	}
	return nil, false, errors.ErrUnsupported
}

// Stop implements [Driver].
func (d *InProcess) Stop() error {
	d.mu.Lock()
	for _, c := range d.cands {
		c.cancel()
	}
	d.mu.Unlock()
	d.wg.Wait()
	return nil
}

// steppedClock is the system clock plus an offset that a fault can step.
type steppedClock struct{ off atomic.Int64 }

func (c *steppedClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *steppedClock) NewTimer(d time.Duration) tenure.Timer {
	return tenure.SystemClock.NewTimer(d)
}

func (c *steppedClock) step(d time.Duration) { c.off.Add(int64(d)) }
