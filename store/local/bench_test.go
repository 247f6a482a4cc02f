//go:build linux

package local_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// BenchmarkHandoff measures a handoff between two handles on one
// directory: from the holder's Release until the other handle, woken by its
// Watch, has acquired the key. It reports the median and 99th percentile.
func BenchmarkHandoff(b *testing.B) {
	dir := b.TempDir()
	const key = "handoff"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := [2]string{"even", "odd"}
	var (
		stores [2]tenure.Store
		chans  [2]<-chan tenure.Record
	)
	for i := range stores {
		s := open(b, dir)
		ch, err := s.Watch(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		stores[i], chans[i] = s, ch
	}
	l, err := stores[0].Acquire(ctx, key, ids[0], time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	samples := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		cur, next := i%2, (i+1)%2
		start := time.Now()
		if err := stores[cur].Release(ctx, l); err != nil {
			b.Fatal(err)
		}
		for r := range chans[next] { // skips records queued earlier
			if !r.Held() && r.Term == l.Term {
				break
			}
		}
		if l, err = stores[next].Acquire(ctx, key, ids[next], time.Minute); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(samples)
	b.ReportMetric(float64(samples[len(samples)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(samples[len(samples)*99/100].Microseconds()), "p99-µs")
}
