package tenure

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"
)

func TestTwoThirdsExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		d := time.Duration(r.Int64())
		if i < 4 {
			d = []time.Duration{0, 1, 2, math.MaxInt64}[i]
		}
		want := new(big.Int).Div(new(big.Int).Mul(big.NewInt(int64(d)), big.NewInt(2)), big.NewInt(3))
		if got := twoThirds(d); got != time.Duration(want.Int64()) {
			t.Fatalf("twoThirds(%d) = %d, want %s", d, got, want)
		}
	}
}

// TestTimingNoOverflow drives the elector's waits with the most extreme
// values Validate accepts and a store reporting an absurd Remaining: every
// wait stays positive. Before, a Remaining near the top of time.Duration
// plus the 4×TTL safety wait overflowed into a negative wait: a spin.
func TestTimingNoOverflow(t *testing.T) {
	for _, ttl := range []time.Duration{MinTTL, MaxTTL} {
		c := Config{Store: nil, Key: "k", Identity: "a", TTL: ttl, Jitter: MaxJitter, RetryInterval: ttl}.WithDefaults()
		e := &Elector{cfg: c}
		for _, rem := range []time.Duration{0, time.Nanosecond, MaxTTL, math.MaxInt64 / 2, math.MaxInt64} {
			for _, watching := range []bool{true, false} {
				if w := e.heldWait(Record{Key: "k", Holder: "b", Term: 1, TTL: rem, Remaining: rem}, watching); w <= 0 {
					t.Errorf("TTL %s, Remaining %s, watching %v: wait %s", ttl, rem, watching, w)
				}
			}
		}
		for failures := 1; failures < 80; failures++ {
			if w := c.jittered(min(c.RetryInterval<<min(failures-1, 16), c.TTL)); w <= 0 {
				t.Errorf("TTL %s: backoff after %d failures is %s", ttl, failures, w)
			}
		}
		if g := e.renewGap(); g <= 0 {
			t.Errorf("TTL %s: renew gap %s", ttl, g)
		}
	}
	if addSat(math.MaxInt64, time.Millisecond) != math.MaxInt64 || addSat(1, 2) != 3 {
		t.Error("addSat does not saturate")
	}
}
