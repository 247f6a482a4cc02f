package tenure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// errTaskReturned is the cause of a leader context cancelled because its
// task returned.
var errTaskReturned = errors.New("tenure: leader task returned")

type renewResult struct {
	sent time.Time
	err  error
}

// holding is the elector's state while it holds one grant: the renew
// deadline, the timers, and the task once it started. The lease is its
// handle's, the [Term] the task sees.
type holding struct {
	e        *Elector
	handle   *Term
	deadline time.Time // the leader context is cancelled at the latest then

	deadlineTimer, renewTimer Timer
	stallTimer                Timer // nil until the task starts, or without StallTimeout
	renewing                  bool
	renewDone                 chan renewResult
	// renews feeds the term's renewer goroutine, started by the first
	// renewal and ended when lead closes it: one goroutine for the term,
	// not one per renewal (whose stack would grow anew each time).
	renews chan renewCall

	cancel       context.CancelCauseFunc // cancels the leader context
	begun        bool                    // the term began: Status and EventElected
	started      bool                    // the task was started
	taskReturned bool
	done         chan error // receives the task's result; nil until it starts
	result       error      // the task's result once it returned
}

// lead holds lease until the task returns or leadership ends, then waits
// for the task, releases the lease if it may still be held, and returns
// whether the task started, the task's error, and the cause that ended
// leadership before the task returned (nil if the task returned first).
//
// The task starts lease.Wait after acquired (at once when Wait is zero);
// the lease is renewed from the start. While it holds the lease, the
// elector also watches the key where the store can watch, so a record that
// shows the grant superseded or gone ends leadership at once instead of at
// the next renewal.
//
// The invariant: the leader context is cancelled no later than
// sent+RenewDeadline, where sent is when the last successful Acquire or
// Renew (in a session: the last keep-alive that covers the grant) was
// sent, measured on the elector's clock.
func (e *Elector) lead(ctx context.Context, gr grant, task Task) (started bool, taskErr, cause error) {
	c := &e.cfg
	clock := c.Clock
	lease, acquired := gr.lease, gr.sent
	t := &holding{e: e, deadline: gr.deadline, renewDone: make(chan renewResult, 1)}
	if !clock.Now().Before(t.deadline) {
		// The grant took so long to arrive that its renew deadline has
		// already passed: the store may regrant soon, so never start the task.
		e.giveBack(ctx, gr, true)
		return false, nil, fmt.Errorf("%w (the acquisition took longer than the renew deadline)", ErrRenewDeadline)
	}
	t.handle = newTerm(lease, clock, acquired, t.deadline)
	leaderCtx, cancelLeader := context.WithCancelCause(context.WithValue(ctx, termKey{}, t.handle))
	defer cancelLeader(errTaskReturned)
	t.cancel = cancelLeader

	renewCtx, cancelRenews := context.WithCancel(ctx)
	var lost chan error // watchLoss (or the session) and watchControl send at most once each
	watchDone := make(chan struct{})
	if sg := gr.session; sg != nil {
		// The session renews and watches for the grant; it extends the
		// handle and sends the cause that ends the grant on sg.lost.
		sg.gen.lead(sg, t.handle)
		lost = sg.lost
		close(watchDone)
	} else {
		lost = make(chan error, 2)
		t.deadlineTimer = clock.NewTimer(t.deadline.Sub(clock.Now()))
		defer t.deadlineTimer.Stop()
		t.renewTimer = clock.NewTimer(c.jittered(c.RenewInterval) - clock.Now().Sub(acquired))
		defer t.renewTimer.Stop()
		go e.watchLoss(renewCtx, lease, lost, watchDone)
	}
	startTimer := clock.NewTimer(max(acquired.Add(lease.Wait).Sub(clock.Now()), 0))
	defer startTimer.Stop()
	if lease.Wait > 0 {
		c.Logger.Info("tenure: granted; waiting before leading, the previous holder may not have noticed its loss yet",
			"key", c.Key, "id", c.Identity, "term", lease.Term, "wait", lease.Wait)
	}

	controlDone := e.watchControl(renewCtx, lease, lost)

	cause = t.loop(ctx, leaderCtx, startTimer, lost, task)
	// Leadership is over or in doubt: stop the task first, then everything else.
	cancelLeader(cmp.Or(cause, errTaskReturned))
	if t.begun {
		e.endTerm()
		if isLoss(cause) {
			// Reported as the task is cancelled, not once it returned: a
			// slow task's overrun follows its loss, and observers (logs,
			// metrics, the status page) stop showing a leader the status
			// no longer shows.
			e.emit(Event{Kind: EventLost, Term: lease.Term, Err: cause})
		}
	}
	cancelRenews()
	<-watchDone
	<-controlDone
	if t.renewing {
		<-t.renewDone
	}
	if t.renews != nil {
		close(t.renews)
	}
	if t.stallTimer != nil {
		t.stallTimer.Stop()
	}
	if t.started && !t.taskReturned {
		t.result = e.awaitTask(lease, t.done)
	}
	e.giveBack(ctx, gr, !errors.Is(cause, ErrLost))
	if t.begun && !isLoss(cause) {
		e.emit(Event{Kind: EventReleased, Term: lease.Term, Err: cause})
	}
	if p, ok := t.result.(*taskPanic); ok {
		panic(p) // the lease is released: let the caller's goroutine crash, or recover
	}
	return t.started, t.result, cause
}

// loop runs the holding until the task returns (nil) or leadership ends (the
// cause). It starts the task when startTimer fires.
func (t *holding) loop(ctx, leaderCtx context.Context, startTimer Timer, lost <-chan error, task Task) error {
	c := &t.e.cfg
	var stallC <-chan time.Time
	for {
		select {
		case <-startTimer.C():
			if err := t.start(leaderCtx, task); err != nil {
				return err
			}
			if t.stallTimer != nil {
				stallC = t.stallTimer.C()
			}
		case err := <-t.done:
			t.result, t.taskReturned = err, true
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-timerC(t.deadlineTimer):
			return fmt.Errorf("%w (%s after the last successful renewal was sent)", ErrRenewDeadline, c.RenewDeadline)
		case err := <-lost:
			return err
		case <-stallC:
			idle := c.Clock.Now().Sub(t.handle.lastProgress())
			if idle >= c.StallTimeout {
				return fmt.Errorf("%w: no progress for %s", ErrStalled, idle)
			}
			t.stallTimer.Reset(c.StallTimeout - idle)
		case <-timerC(t.renewTimer):
			t.renew(ctx)
		case r := <-t.renewDone:
			t.renewing = false
			if err := t.renewed(r); err != nil {
				return err
			}
		}
	}
}

// start begins the term's status and runs the task with the leader
// context, unless the renew deadline passed while OnEvent held the
// elector up: then it returns the cause that ends leadership.
func (t *holding) start(leaderCtx context.Context, task Task) error {
	e, c := t.e, &t.e.cfg
	now := c.Clock.Now()
	t.handle.base = now
	t.begun = true
	e.beginTerm(t.handle.lease, now, t.deadline)
	if err := t.emit(Event{Kind: EventElected, Term: t.handle.lease.Term}); err != nil {
		return err
	}
	t.started = true
	if c.StallTimeout > 0 {
		t.stallTimer = c.Clock.NewTimer(c.StallTimeout)
	}
	t.done = make(chan error, 1)
	go runTask(leaderCtx, task, t.done)
	return nil
}

// runTask runs task and sends its result on done, also when it does not
// return: a panic is sent as a *taskPanic, for the elector to release the
// lease and panic again in its caller's goroutine, and runtime.Goexit as
// a [Last] error, which ends Run.
func runTask(ctx context.Context, task Task, done chan<- error) {
	returned := false
	defer func() {
		if returned {
			return
		}
		if r := recover(); r != nil {
			done <- &taskPanic{value: r, stack: debug.Stack()}
			return
		}
		done <- Last(errTaskGoexit)
	}()
	err := task(ctx)
	returned = true
	done <- err
}

// errTaskGoexit is the result of a task that called runtime.Goexit.
var errTaskGoexit = errors.New("tenure: leader task called runtime.Goexit (t.FailNow or t.Fatal in a task?)")

// taskPanic is a task's panic, carried to the goroutine of Run or Do.
type taskPanic struct {
	value any
	stack []byte
}

func (p *taskPanic) Error() string {
	return fmt.Sprintf("tenure: leader task panicked: %v\n\ngoroutine of the task:\n%s", p.value, p.stack)
}

// Unwrap returns the panic's value if it is an error.
func (p *taskPanic) Unwrap() error {
	err, _ := p.value.(error)
	return err
}

// emit reports ev while the elector holds a grant. OnEvent runs in the
// elector's goroutine and must not block, but if it does, the renew
// deadline still holds: a guard cancels the leader context once the
// deadline passes while OnEvent runs, and emit then returns the cause,
// which ends leadership.
func (t *holding) emit(ev Event) error {
	if t.e.cfg.OnEvent == nil {
		t.e.emit(ev)
		return nil
	}
	c := &t.e.cfg
	blocked := func() error {
		return fmt.Errorf("%w (%s after the last successful renewal was sent, while Config.OnEvent blocked the elector)", ErrRenewDeadline, c.RenewDeadline)
	}
	var g callbackGuard
	g.arm(t.handle.Deadline, c.Clock, func() { t.cancel(blocked()) })
	t.e.emit(ev)
	if g.returned() {
		return nil
	}
	return blocked()
}

// renew sends one renewal in the background unless one is under way; it is
// bounded by the renew deadline.
func (t *holding) renew(ctx context.Context) {
	if t.renewing {
		return
	}
	t.renewing = true
	e := t.e
	sent := e.cfg.Clock.Now()
	rctx, cancel := e.requestContext(ctx, t.deadline)
	if t.renews == nil {
		t.renews = make(chan renewCall, 1)
		go t.renewer(t.renews)
	}
	t.renews <- renewCall{ctx: rctx, cancel: cancel, sent: sent}
}

// renewCall is one renewal for the renewer: its bounded context, and when
// it was sent.
type renewCall struct {
	ctx    context.Context
	cancel context.CancelFunc
	sent   time.Time
}

// renewer sends the renewals it is given, one at a time, each result on
// renewDone, until calls is closed.
func (t *holding) renewer(calls <-chan renewCall) {
	for c := range calls {
		err := t.e.cfg.Store.Renew(c.ctx, t.handle.lease)
		c.cancel()
		t.renewDone <- renewResult{c.sent, err}
	}
}

// renewed handles a renewal's result: it moves the deadline on success and
// returns the cause that ends leadership, if any.
func (t *holding) renewed(r renewResult) error {
	e, c := t.e, &t.e.cfg
	now := c.Clock.Now()
	switch {
	case r.err == nil && now.Before(t.deadline):
		t.deadline = r.sent.Add(c.RenewDeadline)
		if t.started {
			// Status first: a task woken by Renewed reads the same
			// deadline from Status.
			e.renewed(r.sent, now, t.deadline)
		}
		t.handle.extend(t.deadline)
		// The deadline moves later at each renewal: see rearm.
		rearm(t.deadlineTimer, t.deadline.Sub(now))
		t.renewTimer.Reset(c.jittered(c.RenewInterval) - now.Sub(r.sent))
		e.ctl.noteKeyRenewed()
		return t.emit(Event{Kind: EventRenewed, Term: t.handle.lease.Term, Took: now.Sub(r.sent)})
	case r.err == nil:
		return fmt.Errorf("%w (the renewal succeeded too late)", ErrRenewDeadline)
	case errors.Is(r.err, ErrLost):
		return r.err
	default:
		e.setError(r.err)
		t.renewTimer.Reset(c.jittered(c.RetryInterval))
		return t.emit(Event{Kind: EventRenewFailed, Term: t.handle.lease.Term, Err: r.err})
	}
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
	e.setOverrun(true)
	e.emit(Event{Kind: EventTaskOverrun, Term: lease.Term})
	err := <-done
	e.setOverrun(false)
	return err
}

// giveBack releases a grant unless it is known lost (release false) and,
// in a session, forgets it.
func (e *Elector) giveBack(ctx context.Context, gr grant, release bool) {
	if sg := gr.session; sg != nil {
		sg.gen.forget(ctx, sg, release)
		return
	}
	if release {
		e.release(ctx, gr.lease)
	}
}

// timerC is t's channel, or nil (never ready) when t is nil.
func timerC(t Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
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
