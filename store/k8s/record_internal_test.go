package k8s

import (
	"math"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// A grant annotation edited with kubectl to a ttlNanos of 2^63-1, or a
// negative one, on a Lease whose holder is the annotation's: the record a
// handle reads of it, just seen, is held and has no negative TTL or
// Remaining (with 2^63-1 the lease duration plus its margin overflowed,
// and the live grant read as free).
func TestOwnGrantWithForgedTTL(t *testing.T) {
	for _, ttl := range []int64{math.MaxInt64, math.MaxInt64 - int64(time.Second), -5} {
		l := &coordinationv1.Lease{}
		spec(l, "alpha", time.Second, 1, time.Now())
		annotate(l, grant{Key: "k", Term: 1, Transitions: 1, Holder: "alpha", TTL: ttl, Token: "t"})
		v, ok := read("k", l)
		if !ok || !v.own {
			t.Fatalf("read of the Lease = %+v, %v; want it read as tenure's own grant", v, ok)
		}
		r := record("k", v, 0)
		if ttl > 0 && r.Holder != "alpha" {
			t.Errorf("ttlNanos %d: the record of a grant just seen is %+v, not held by alpha", ttl, r)
		}
		if r.TTL < 0 || r.Remaining < 0 {
			t.Errorf("ttlNanos %d: record %+v has a negative TTL or Remaining", ttl, r)
		}
	}
}
