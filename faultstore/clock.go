package faultstore

import (
	"math"
	"time"

	"github.com/tenurehq/tenure"
)

// Skew returns a clock that runs rate times as fast as base: after base
// advanced by d, the skewed clock advanced by d×rate, and a timer set for d
// fires after d/rate of base time (rounded up, so it never fires early by
// the skewed clock's own reading). rate 1.01 is a clock 1% fast, 0.99 one
// 1% slow. It models a process whose oscillator drifts; it is not a clock
// jump. The values a timer delivers on its channel are base's readings.
// rate must be positive.
func Skew(base tenure.Clock, rate float64) tenure.Clock {
	if rate <= 0 || math.IsNaN(rate) || math.IsInf(rate, 0) {
		panic("faultstore: Skew rate must be positive and finite")
	}
	return &skewed{base: base, rate: rate, origin: base.Now()}
}

type skewed struct {
	base   tenure.Clock
	rate   float64
	origin time.Time
}

func (c *skewed) Now() time.Time {
	return c.origin.Add(time.Duration(float64(c.base.Now().Sub(c.origin)) * c.rate))
}

func (c *skewed) NewTimer(d time.Duration) tenure.Timer {
	return skewTimer{c, c.base.NewTimer(c.real(d))}
}

// real converts a duration on the skewed clock to base time, rounding up.
func (c *skewed) real(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return time.Duration(math.Ceil(float64(d)/c.rate)) + 1
}

type skewTimer struct {
	c *skewed
	t tenure.Timer
}

func (t skewTimer) C() <-chan time.Time        { return t.t.C() }
func (t skewTimer) Stop() bool                 { return t.t.Stop() }
func (t skewTimer) Reset(d time.Duration) bool { return t.t.Reset(t.c.real(d)) }
