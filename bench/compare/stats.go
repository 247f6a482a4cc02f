package compare

import (
	"math"
	"slices"
	"time"
)

// Summary is the median and 99th percentile of a set of samples, in the
// unit of the metric they measure.
type Summary struct {
	N      int
	Median float64
	P99    float64
	Mean   float64
}

// Summarize returns the summary of samples; the zero Summary if there are
// none. The median of an even count is the mean of the two middle samples;
// the 99th percentile is the nearest-rank one, so with fewer than 100
// samples it is the largest. It does not modify samples.
func Summarize(samples []float64) Summary {
	n := len(samples)
	if n == 0 {
		return Summary{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum float64
	for _, v := range s {
		sum += v
	}
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Summary{N: n, Median: med, P99: s[nearestRank(99, n)-1], Mean: sum / float64(n)}
}

// nearestRank is the 1-based rank of the p-th percentile of n samples.
func nearestRank(p float64, n int) int {
	r := int(math.Ceil(p / 100 * float64(n)))
	return min(max(r, 1), n)
}

// Millis converts durations to milliseconds, the unit of the latency rows.
func Millis(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = float64(d) / float64(time.Millisecond)
	}
	return out
}

// Ratio is a/b, and false when b is zero (no meaningful ratio).
func Ratio(a, b float64) (float64, bool) {
	if b == 0 {
		return 0, false
	}
	return a / b, true
}
