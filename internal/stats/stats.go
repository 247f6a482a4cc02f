// Package stats holds the summary statistics tenure's benchmarks and
// reports share, so every figure in the README means the same thing.
package stats

import (
	"slices"
	"time"
)

// Percentile returns the p-th percentile of samples by the nearest-rank
// method (the smallest sample with at least p % of the samples at or below
// it), or 0 for no samples. samples is not modified.
func Percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	rank := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(rank, len(s)-1))]
}
