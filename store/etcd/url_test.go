package etcd

import (
	"math"
	"testing"
	"time"
)

// TestTTLSecondsNoOverflow: a huge TTL stays huge. Before, ttl+1s-1
// overflowed and a lease of about 292 years became a one-second lease.
func TestTTLSecondsNoOverflow(t *testing.T) {
	for ttl, want := range map[time.Duration]int64{
		time.Nanosecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 2 * time.Second: 2,
		math.MaxInt64: math.MaxInt64/int64(time.Second) + 1,
	} {
		if got := ttlSeconds(ttl); got != want {
			t.Errorf("ttlSeconds(%s) = %d, want %d", ttl, got, want)
		}
	}
}
