package tenure

import (
	"sync/atomic"
	"time"
)

// callbackGuard runs a function once a deadline passes while a callback
// that must not block (OnEvent, OnKeepAlive) still runs, in the caller's
// stead: the caller's goroutine is the one that would act at the deadline.
// It waits with a timer of the package time, armed and stopped by the
// caller's goroutine, so it adds no goroutine and nothing that depends on
// scheduling (seeded simulations replay exactly); it judges the deadline
// by the given clock, and waits again while that clock says it has not
// passed (a fake clock, or a session that extended the deadline).
type callbackGuard struct {
	state atomic.Int32 // 0 running, 1 returned in time, 2 fired
	timer *time.Timer
}

// arm starts watching: fire runs, once, if deadline() passes on clock
// before returned is called.
func (g *callbackGuard) arm(deadline func() time.Time, clock Clock, fire func()) {
	check := func() {
		if g.state.Load() != 0 {
			return
		}
		if d := deadline().Sub(clock.Now()); d > 0 {
			g.timer.Reset(d)
			return
		}
		if g.state.CompareAndSwap(0, 2) {
			fire()
		}
	}
	// Armed far off first, so that check never runs before g.timer is set.
	g.timer = time.AfterFunc(time.Duration(1<<62), check)
	g.timer.Reset(deadline().Sub(clock.Now()))
}

// returned reports whether the callback returned before the guard fired,
// and stops the guard. Called once, from the goroutine that armed it.
func (g *callbackGuard) returned() bool {
	if g.state.CompareAndSwap(0, 1) {
		g.timer.Stop()
		return true
	}
	return false
}
