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

// rearm resets t to fire after d. It first resets t to fire at once: the
// Go runtime leaves a timer moved later, and one stopped (such as the
// context of a request just made), at its old place in its heap and wakes
// the process at that instant for nothing, unless a timer moved earlier
// makes it put the heap in order first. An idle leader's timers move later
// with each renewal; without this it woke for nothing about every other
// renewal, a third of its wake-ups, and on a virtual machine a wake-up
// costs about as much as a renewal's own work (docs/measurements.md). The
// first Reset leaves no value to receive (see [Timer]) and changes nothing
// but when the runtime tidies its heap; the caller must not be receiving
// from t's channel meanwhile. Only for channel timers such as [Timer]: on
// a time.AfterFunc timer, Reset(0) would run its function.
func rearm(t Timer, d time.Duration) {
	t.Reset(0)
	t.Reset(d)
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
