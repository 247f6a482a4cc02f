package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Task is the work a leader does. It runs with a leader context: one that
// carries the lease ([LeaseFrom]) and is cancelled when leadership ends or is
// in doubt, with a cause ([context.Cause]) matching [ErrLost],
// [ErrRenewDeadline] or [ErrStalled], [ErrSteppedDown] when it was asked
// to step down, or the caller's context error. The task
// must return promptly once its context is done: the elector cannot stop a
// goroutine, and a task that keeps acting after cancellation acts without the
// lease. Fence every write to the protected resource with the lease's term.
//
// A task that panics ends its term like one that returned: the elector
// releases the lease, then panics again in the goroutine of [Elector.Run]
// or [Elector.Do], with an error carrying the panic's value (unwrapped by
// errors.As when it was an error) and the task's stack. Unless that
// caller recovers, the process crashes, as it would have, but another
// candidate need not wait for the lease to expire. A task that calls
// runtime.Goexit (t.Fatal in a test's task) ends Run or Do, after the
// release, with an error saying so.
type Task func(ctx context.Context) error

// Elector campaigns for one key on behalf of one candidate and runs a [Task]
// while it leads. Create it with [New]. Its methods are safe for concurrent
// use, but only one Run or Do may be active at a time.
type Elector struct {
	cfg     Config
	running atomic.Bool

	mu     sync.Mutex
	status Status

	ctl controlState // Config.Control's state: see controlelector.go
}

// New returns an elector for cfg, with defaults filled in
// ([Config.WithDefaults]). It returns an error wrapping [ErrInvalid] that
// names the offending field if the result fails [Config.Validate]. New does
// not contact the store.
func New(cfg Config) (*Elector, error) { return newElector(cfg, false) }

// newElector is New; with derived, cfg.Key may be a derived key
// ([BaseKey]), as the preference key [Prefer] holds.
func newElector(cfg Config, derived bool) (*Elector, error) {
	given := cfg
	cfg = cfg.WithDefaults()
	if err := cfg.validate(derived); err != nil {
		return nil, given.blameDefaults(cfg, derived, err)
	}
	e := &Elector{cfg: cfg}
	e.status.Key, e.status.Identity = cfg.Key, cfg.Identity
	if cfg.Control != nil {
		e.ctl.keyRenewed = make(chan struct{}, 1)
	}
	return e, nil
}

// Config returns the elector's configuration, defaults filled in.
func (e *Elector) Config() Config { return e.cfg }

// Run campaigns for the key and runs task each time it is elected, until ctx
// is done or the task asks to stop; then it cancels a running task, waits
// for it to return, releases the lease and returns.
//
// Each term goes like this: once the store grants the lease, task runs with
// a leader context while the elector renews in the background. When the
// task returns (with or without an error; errors are logged), the lease is
// released so another candidate can take over at once. When renewal fails
// definitively or cannot succeed before [Config.RenewDeadline], or the task
// stalls, the leader context is cancelled first and the lease released (if
// still held) once the task returned. Either way Run waits a jittered
// [Config.RetryInterval] and campaigns again: it is not one-shot. After a
// step-down ([ErrSteppedDown]) it campaigns again at once, and the
// request holds it back. While the
// task keeps failing (it returned an error while still leading, term after
// term), the wait doubles with each failure, up to [Config.TTL], so a
// broken task does not churn through terms; any other term ends the
// backoff.
//
// A task that returns [Last](err) ends Run after its term: Run releases
// the lease as usual and returns err, the last task's result, without
// cancelling anything. That is how a task told to shut down (by a signal,
// say) finishes its work still leading and stops Run.
//
// Run blocks until then and otherwise returns ctx's error, or a permanent
// store error (one matching [ErrInvalid], [ErrClosed] or
// [ErrTermsExhausted]) met while campaigning. It returns [ErrRunning] if
// the elector is already running, and an error wrapping [ErrInvalid] at
// once for a nil task.
func (e *Elector) Run(ctx context.Context, task Task) error {
	if err := e.begin(ctx, task, "Elector.Run"); err != nil {
		return err
	}
	defer e.running.Store(false)
	defer e.register(ctx)()
	failures := 0
	for {
		gr, err := e.campaign(ctx)
		if err != nil {
			return err
		}
		lease := gr.lease
		_, taskErr, cause := e.lead(ctx, gr, task)
		if result, last := lastResult(taskErr); last {
			return result
		}
		switch {
		case taskErr == nil || ctx.Err() != nil:
			failures = 0
		case cause == nil:
			failures++
		default:
			failures = 0 // it failed because leadership ended
		}
		wait := e.retryWait(failures)
		if errors.Is(cause, ErrSteppedDown) {
			wait = 0 // holding back is the step-down request's job (see beforeAcquire)
		}
		if taskErr != nil && ctx.Err() == nil && !errors.Is(cause, ErrSteppedDown) {
			e.cfg.Logger.Warn("tenure: leader task failed", "key", e.cfg.Key, "id", e.cfg.Identity,
				"term", lease.Term, "err", taskErr, "retry_in", wait)
		}
		if !sleep(ctx, e.cfg.Clock, wait) {
			return ctx.Err()
		}
	}
}

// retryWait is how long Run waits before campaigning again after a term:
// a jittered RetryInterval, doubled for each of failures consecutive
// failed terms, up to TTL.
func (e *Elector) retryWait(failures int) time.Duration {
	return e.cfg.jittered(min(e.cfg.RetryInterval<<min(failures, 16), e.cfg.TTL))
}

// Last wraps err, a task's result, to end [Elector.Run] after this term:
// Run releases the lease and returns err (nil if err is nil) instead of
// campaigning again. [Elector.Do] returns err itself, as it would without
// Last. errors.Is and errors.As see through it.
func Last(err error) error { return &lastError{err} }

type lastError struct{ err error }

func (l *lastError) Error() string {
	if l.err == nil {
		return "tenure: last term"
	}
	return l.err.Error()
}

func (l *lastError) Unwrap() error { return l.err }

// lastResult unwraps a task result made by Last; last reports whether it
// was one.
func lastResult(taskErr error) (result error, last bool) {
	var l *lastError
	if errors.As(taskErr, &l) {
		return l.err, true
	}
	return taskErr, false
}

// begin marks e as running for what (Elector.Run or Elector.Do), or
// returns ErrRunning if it runs already; a nil task or ctx is refused with
// an error wrapping ErrInvalid, leaving e idle.
func (e *Elector) begin(ctx context.Context, task Task, what string) error {
	if !e.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	err := checkContext(ctx, what)
	if task == nil {
		err = fmt.Errorf("%w: %s with a nil task", ErrInvalid, what)
	}
	if err != nil {
		e.running.Store(false)
	}
	return err
}

// Do campaigns until elected, runs task once as leader, releases the lease and
// returns: the way to say "the leader runs this once". It returns task's
// error if the task returned while still leading. If leadership ended first,
// it returns an error matching the cause ([ErrLost], [ErrRenewDeadline],
// [ErrStalled], [ErrSteppedDown] or ctx's error) once the task returned, which also wraps the
// task's own error if it returned one, so errors.As finds the task's result
// either way; the task may then have done only part of its work, and the
// caller decides whether to call Do again. A task's [Last] wrapper is
// removed.
//
// Do blocks until then. It returns ctx's error if ctx is done before the
// elector is elected, a permanent store error (matching [ErrInvalid],
// [ErrClosed] or [ErrTermsExhausted]) met while campaigning,
// [ErrRunning] if the elector is already running, and an error wrapping
// [ErrInvalid] at once for a nil task.
func (e *Elector) Do(ctx context.Context, task Task) error {
	if err := e.begin(ctx, task, "Elector.Do"); err != nil {
		return err
	}
	defer e.running.Store(false)
	defer e.register(ctx)()
	for {
		gr, err := e.campaign(ctx)
		if err != nil {
			return err
		}
		started, taskErr, cause := e.lead(ctx, gr, task)
		if !started && ctx.Err() == nil {
			// Lost during the grant's Wait, before the task ran: campaign
			// again, as if never elected.
			if !sleep(ctx, e.cfg.Clock, e.cfg.jittered(e.cfg.RetryInterval)) {
				return ctx.Err()
			}
			continue
		}
		taskErr, _ = lastResult(taskErr)
		return e.doResult(taskErr, cause)
	}
}

// doResult is what Do returns once its task ran.
func (e *Elector) doResult(taskErr, cause error) error {
	switch {
	case cause != nil && taskErr != nil:
		return fmt.Errorf("tenure: leadership of %q ended before the task returned: %w (the task returned: %w)", e.cfg.Key, cause, taskErr)
	case cause != nil:
		return fmt.Errorf("tenure: leadership of %q ended before the task returned: %w", e.cfg.Key, cause)
	}
	return taskErr
}

// emit logs ev and hands it to Config.OnEvent.
func (e *Elector) emit(ev Event) { e.sink().emit(ev) }

// sink returns what emit needs of e, so that what reports events after e
// is done (a Leadership of Session.Campaign) need not keep e.
func (e *Elector) sink() eventSink {
	return eventSink{key: e.cfg.Key, id: e.cfg.Identity, clock: e.cfg.Clock, log: e.cfg.Logger,
		on: e.cfg.OnEvent, stopTimeout: e.cfg.StopTimeout}
}

// eventSink stamps, logs and delivers an elector's events.
type eventSink struct {
	key, id     string
	clock       Clock
	log         *slog.Logger
	on          func(Event)
	stopTimeout time.Duration
}

// emit logs ev and hands it to the OnEvent callback, if any.
func (k eventSink) emit(ev Event) {
	ev.Time = k.clock.Now()
	ev.Key, ev.Identity = k.key, k.id
	log := k.log
	switch ev.Kind {
	case EventElected:
		log.Info("tenure: elected", "key", ev.Key, "id", ev.Identity, "term", ev.Term)
	case EventLost:
		log.Info("tenure: leadership lost", "key", ev.Key, "id", ev.Identity, "term", ev.Term, "reason", ev.Err.Error())
	case EventReleased:
		log.Info("tenure: leadership released", "key", ev.Key, "id", ev.Identity, "term", ev.Term, "err", ev.Err)
	case EventLeaderChanged:
		log.Debug("tenure: leader changed", "key", ev.Key, "id", ev.Identity, "holder", ev.Holder, "term", ev.Term)
	case EventRenewFailed:
		log.Warn("tenure: renewal failed, retrying", "key", ev.Key, "id", ev.Identity, "term", ev.Term, "err", ev.Err)
	case EventTaskOverrun:
		log.Error("tenure: leader task still running after its context was cancelled", "key", ev.Key,
			"id", ev.Identity, "term", ev.Term, "stop_timeout", k.stopTimeout)
	}
	if k.on != nil {
		k.on(ev)
	}
}

// logStoreError logs a store error at warning level with the key, the
// identity and attrs.
func (e *Elector) logStoreError(msg string, err error, attrs ...any) {
	e.cfg.Logger.Log(context.Background(), slog.LevelWarn, msg,
		append([]any{"key", e.cfg.Key, "id", e.cfg.Identity, "err", err}, attrs...)...)
}

// isLoss reports whether err says leadership was taken away or became
// doubtful, as opposed to given up by the task or the caller.
func isLoss(err error) bool {
	return errors.Is(err, ErrLost) || errors.Is(err, ErrRenewDeadline) || errors.Is(err, ErrStalled)
}

// isPermanent reports whether a store error will not go away by retrying.
func isPermanent(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, ErrClosed) || errors.Is(err, ErrTermsExhausted)
}

// requestContext bounds one store request by RequestTimeout and, if not
// zero, by limit.
func (e *Elector) requestContext(ctx context.Context, limit time.Time) (context.Context, context.CancelFunc) {
	d := e.cfg.Clock.Now().Add(e.cfg.RequestTimeout)
	if !limit.IsZero() && limit.Before(d) {
		d = limit
	}
	return withDeadline(ctx, e.cfg.Clock, d, errRequestTimeout)
}

var errRequestTimeout = errors.New("tenure: store request timed out")
