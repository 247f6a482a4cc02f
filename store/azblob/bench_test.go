package azblob_test

import (
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/storetest"
)

// BenchmarkFailover measures graceful handoff and crash failover through
// real electors on Azurite. Azure's shortest lease is 15 s, so the crash
// half takes about 20 × 15 s. Run it with -run '^$' -bench Failover -benchtime 1x.
//
// Graceful handoff is bounded by the watch's poll interval (200 ms) plus
// the release (3 requests) and the acquisition (3 requests); crash
// failover by the 15 s lease plus one poll interval. In this benchmark the
// leader lets go a few milliseconds after the follower's watch polled, so
// every handoff waits nearly a whole poll interval: its figures are the
// worst case, where real handoffs average half a poll interval.
func BenchmarkFailover(b *testing.B) {
	srv := testserver.Azurite(b)
	raw := storeURL(srv, "bench", randomName(b))
	storetest.BenchFailover(b, storetest.BenchOptions{
		Open:   func(t testing.TB) tenure.Store { return storetest.OpenClosing(t, tenure.Open, raw) },
		TTL:    ttl,
		Trials: 20,
	})
}

// BenchmarkOps measures the latency of each store call against Azurite and
// reports its median and p99 (a graceful handoff costs one Release and one
// Acquire plus up to one watch poll interval).
func BenchmarkOps(b *testing.B) {
	srv := testserver.Azurite(b)
	st := storetest.OpenClosing(b, tenure.Open, storeURL(srv, "bench", randomName(b)))
	ctx := b.Context()
	const n = 200
	var get, acquire, renew, release []time.Duration
	timed := func(into *[]time.Duration, f func() error) {
		began := time.Now()
		if err := f(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, time.Since(began))
	}
	for range n {
		var l tenure.Lease
		timed(&acquire, func() (err error) { l, err = st.Acquire(ctx, "k", "a", ttl); return err })
		timed(&get, func() error { _, err := st.Get(ctx, "k"); return err })
		timed(&renew, func() error { return st.Renew(ctx, l) })
		timed(&release, func() error { return st.Release(ctx, l) })
	}
	for _, m := range []struct {
		name    string
		samples []time.Duration
	}{{"get", get}, {"acquire", acquire}, {"renew", renew}, {"release", release}} {
		p50, p99 := storetest.Percentile(m.samples, 50), storetest.Percentile(m.samples, 99)
		b.ReportMetric(float64(p50)/1e6, m.name+"-p50-ms")
		b.ReportMetric(float64(p99)/1e6, m.name+"-p99-ms")
		b.Logf("%s: p50 %s p99 %s (%d samples)", m.name, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond), len(m.samples))
	}
}
