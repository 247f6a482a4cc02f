package stats

import (
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 20; i >= 1; i-- { // unsorted on purpose
		s = append(s, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 10}, {99, 20}, {100, 20}, {5, 1}, {0, 1}, {51, 11}} {
		if got := Percentile(s, c.p); got != c.want {
			t.Errorf("Percentile(1..20, %g) = %d, want %d", c.p, got, c.want)
		}
	}
	if s[0] != 20 {
		t.Error("Percentile sorted its input in place")
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile of no samples is not 0")
	}
}
