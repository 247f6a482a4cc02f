package tenure

import (
	"context"
	"time"
)

// Clock is the elector's and the in-memory store's source of time. The
// default is [SystemClock]; tests inject their own fake clock or run
// inside a testing/synctest bubble. Implementations must be safe for
// concurrent use, and durations between two Now readings must follow the
// monotonic clock, not the wall clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a [Clock], with the semantics of
// [time.Timer] as of Go 1.23 (Stop and Reset leave no stale value to drain).
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// SystemClock is the [Clock] of package time.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time        { return t.t.C }
func (t sysTimer) Stop() bool                 { return t.t.Stop() }
func (t sysTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// sleep waits for d on c, or until ctx is done; it reports whether the full
// duration passed.
func sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// withDeadline is context.WithDeadline measured on c rather than on the
// system clock, so a fake or skewed clock governs request deadlines too.
// The cause given to the context when the deadline passes is cause.
func withDeadline(ctx context.Context, c Clock, deadline time.Time, cause error) (context.Context, context.CancelFunc) {
	if _, ok := c.(systemClock); ok {
		return context.WithDeadlineCause(ctx, deadline, cause)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := c.NewTimer(deadline.Sub(c.Now()))
	go func() {
		select {
		case <-t.C():
			cancel(cause)
		case <-ctx.Done():
			t.Stop()
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
