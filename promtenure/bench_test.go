package promtenure

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/stats"
)

// BenchmarkScrape: one registry of 1,000 Collectors, each key elected
// and renewed once (so every series, the histogram too, is exported).
// It reports the heap the Collectors take per key and a scrape's median
// and p99:
//
//	go test -run '^$' -bench Scrape -benchtime 200x ./promtenure
func BenchmarkScrape(b *testing.B) {
	const n = 1000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	reg := prometheus.NewRegistry()
	cs := make([]*Collector, n)
	for i := range cs {
		key := fmt.Sprintf("partition-%04d", i)
		cs[i] = New(key)
		reg.MustRegister(cs[i])
		on := cs[i].OnEvent(nil)
		on(tenure.Event{Kind: tenure.EventElected, Key: key, Identity: "a", Term: 1})
		on(tenure.Event{Kind: tenure.EventRenewed, Key: key, Took: 3 * time.Millisecond})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perKey := float64(after.HeapAlloc-before.HeapAlloc) / n
	var took []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.ReportMetric(float64(stats.Percentile(took, 50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(stats.Percentile(took, 99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(perKey, "heap-B/key") // after the loop, which resets the reported metrics
	runtime.KeepAlive(cs)
}
