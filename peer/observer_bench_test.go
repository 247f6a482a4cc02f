package peer_test

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkObserverGet measures an observer's Get (one status query to each
// of 3 bully members on loopback TCP, in parallel, on kept connections) and
// reports the median and p99.
//
//	go test ./peer -run '^$' -bench ObserverGet -benchtime 500x
func BenchmarkObserverGet(b *testing.B) {
	g := newTCPGroup(b, "bully", 3)
	for id := uint64(1); id <= 3; id++ {
		g.start(id)
	}
	g.awaitLeader(3, 5*time.Second)
	o := openObserver(b, g.observerURL(g.secret))
	ctx := context.Background()
	if _, err := o.Get(ctx, "job"); err != nil { // connect
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		r, err := o.Get(ctx, "job")
		took = append(took, time.Since(start))
		if err != nil || r.Holder != "3" {
			b.Fatalf("Get = %+v, %v", r, err)
		}
	}
	b.StopTimer()
	slices.Sort(took)
	med, p99 := took[len(took)/2], took[min(len(took)-1, len(took)*99/100)]
	b.ReportMetric(float64(med)/1e3, "median-µs")
	b.ReportMetric(float64(p99)/1e3, "p99-µs")
	b.Logf("observer Get of 3 members: median %s, p99 %s over %d", med, p99, len(took))
}
