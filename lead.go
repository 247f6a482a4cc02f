package tenure

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errTaskReturned is the cause of a leader context cancelled because its
// task returned.
var errTaskReturned = errors.New("tenure: leader task returned")

type renewResult struct {
	sent time.Time
	err  error
}

// lead runs task under lease until the task returns or leadership ends, then
// waits for the task, releases the lease if it may still be held, and
// returns the task's error and the cause that ended leadership before the
// task returned (nil if the task returned first).
//
// The invariant: the leader context is cancelled no later than
// sent+RenewDeadline, where sent is when the last successful Acquire or
// Renew was sent, measured on the elector's clock.
func (e *Elector) lead(ctx context.Context, lease Lease, acquired time.Time, task Task) (taskErr, cause error) {
	c := &e.cfg
	clock := c.Clock
	st := &leaderState{lease: lease, clock: clock, base: acquired}
	leaderCtx, cancelLeader := context.WithCancelCause(context.WithValue(ctx, leaseKey{}, st))
	defer cancelLeader(errTaskReturned)

	deadline := acquired.Add(c.RenewDeadline)
	if !clock.Now().Before(deadline) {
		// The grant took so long to arrive that its renew deadline has
		// already passed: the store may regrant soon, so never start the task.
		cause = fmt.Errorf("%w (the acquisition took longer than the renew deadline)", ErrRenewDeadline)
		e.release(ctx, lease)
		return nil, cause
	}
	e.beginTerm(lease, st, acquired, deadline)
	e.emit(Event{Kind: EventElected, Term: lease.Term})

	done := make(chan error, 1)
	go func() { done <- task(leaderCtx) }()

	deadlineTimer := clock.NewTimer(deadline.Sub(clock.Now()))
	defer deadlineTimer.Stop()
	renewTimer := clock.NewTimer(c.jittered(c.RenewInterval) - clock.Now().Sub(acquired))
	defer renewTimer.Stop()
	var stallC <-chan time.Time
	var stallTimer Timer
	if c.StallTimeout > 0 {
		stallTimer = clock.NewTimer(c.StallTimeout)
		defer stallTimer.Stop()
		stallC = stallTimer.C()
	}

	renewDone := make(chan renewResult, 1)
	renewCtx, cancelRenews := context.WithCancel(ctx)
	renewing := false
	taskReturned := false
loop:
	for {
		select {
		case taskErr = <-done:
			taskReturned = true
			break loop
		case <-ctx.Done():
			cause = context.Cause(ctx)
			break loop
		case <-deadlineTimer.C():
			cause = fmt.Errorf("%w (%s after the last successful renewal was sent)", ErrRenewDeadline, c.RenewDeadline)
			break loop
		case <-stallC:
			idle := clock.Now().Sub(st.lastProgress())
			if idle >= c.StallTimeout {
				cause = fmt.Errorf("%w: no progress for %s", ErrStalled, idle)
				break loop
			}
			stallTimer.Reset(c.StallTimeout - idle)
		case <-renewTimer.C():
			if renewing {
				break
			}
			renewing = true
			sent := clock.Now()
			rctx, cancel := e.requestContext(renewCtx, deadline)
			go func() {
				defer cancel()
				renewDone <- renewResult{sent, c.Store.Renew(rctx, lease)}
			}()
		case r := <-renewDone:
			renewing = false
			now := clock.Now()
			switch {
			case r.err == nil && now.Before(deadline):
				deadline = r.sent.Add(c.RenewDeadline)
				deadlineTimer.Reset(deadline.Sub(now))
				renewTimer.Reset(c.jittered(c.RenewInterval) - now.Sub(r.sent))
				e.renewed(r.sent, now, deadline)
			case r.err == nil:
				cause = fmt.Errorf("%w (the renewal succeeded too late)", ErrRenewDeadline)
				break loop
			case errors.Is(r.err, ErrLost):
				cause = r.err
				break loop
			default:
				e.setError(r.err)
				e.emit(Event{Kind: EventRenewFailed, Term: lease.Term, Err: r.err})
				renewTimer.Reset(c.jittered(c.RetryInterval))
			}
		}
	}
	// Leadership is over or in doubt: stop the task first, then everything else.
	if cause != nil {
		cancelLeader(cause)
	} else {
		cancelLeader(errTaskReturned)
	}
	e.endTerm()
	cancelRenews()
	if renewing {
		<-renewDone
	}
	if !taskReturned {
		taskErr = e.awaitTask(lease, done)
	}
	if !errors.Is(cause, ErrLost) {
		e.release(ctx, lease)
	}
	e.emit(Event{Kind: EventLost, Term: lease.Term, Err: cause})
	return taskErr, cause
}

// awaitTask waits for a cancelled task to return, reporting an overrun after
// StopTimeout. It never gives up: campaigning again while the task runs
// would let two tasks of this process lead at once.
func (e *Elector) awaitTask(lease Lease, done <-chan error) error {
	t := e.cfg.Clock.NewTimer(e.cfg.StopTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C():
	}
	e.mu.Lock()
	e.status.TaskOverrun = true
	e.mu.Unlock()
	e.emit(Event{Kind: EventTaskOverrun, Term: lease.Term})
	err := <-done
	e.mu.Lock()
	e.status.TaskOverrun = false
	e.mu.Unlock()
	return err
}

// release gives the lease back, best effort, with a fresh deadline: the
// caller's context may be done (shutdown) and the lease should still go.
func (e *Elector) release(ctx context.Context, lease Lease) {
	rctx, cancel := e.requestContext(context.WithoutCancel(ctx), time.Time{})
	defer cancel()
	if err := e.cfg.Store.Release(rctx, lease); err != nil && !errors.Is(err, ErrLost) {
		e.logStoreError("tenure: release failed; the lease will expire instead", err, "term", lease.Term)
	}
}
