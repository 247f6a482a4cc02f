package simtest

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure/peer/memnet"
)

// BenchSizes are the group sizes of BenchmarkElection.
var BenchSizes = []int{3, 5, 9, 17, 33}

// EachSize runs f as a subtest of t named "n=N" for each size N of
// [BenchSizes], each inside a synctest bubble of its own.
func EachSize(t *testing.T, f func(t *testing.T, n int)) {
	for _, n := range BenchSizes {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, n) })
		})
	}
}

// BenchElection measures, for each size, the election after the
// coordinator of a healthy group is killed, on memnet in real time with a
// 10ms heartbeat and 50ms timeout (so it includes detection): the messages
// of the election proper (election, answer, coordinator, elected; not
// heartbeats or acks) and the time until every live member follows the new
// coordinator. It reports median and p99 of both, next to theory(n).
func BenchElection(b *testing.B, alg string, theory func(n int) string) {
	for _, n := range BenchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var msgs []float64
			var took []float64
			seed := uint64(0)
			for b.Loop() {
				seed++
				c := New(Options{Algorithm: alg, Size: n, Seed: seed, Heartbeat: 10 * time.Millisecond, Timeout: 50 * time.Millisecond})
				c.Net.SetFaults(memnet.Faults{MaxDelay: time.Millisecond})
				if err := c.StartAll(); err != nil {
					b.Fatal(err)
				}
				_, _, st, d, err := c.Failover(20 * time.Second)
				c.Close()
				if err != nil {
					b.Fatal(err)
				}
				msgs = append(msgs, float64(st.Total(ElectionTypes...)))
				took = append(took, float64(d)/float64(time.Millisecond))
			}
			b.ReportMetric(quantile(msgs, 0.5), "msgs-median")
			b.ReportMetric(quantile(msgs, 0.99), "msgs-p99")
			b.ReportMetric(quantile(took, 0.5), "ms-median")
			b.ReportMetric(quantile(took, 0.99), "ms-p99")
			b.Logf("%s n=%d: theory %s; measured messages median %.0f p99 %.0f, time to elect median %.1fms p99 %.1fms (%d runs)",
				alg, n, theory(n), quantile(msgs, 0.5), quantile(msgs, 0.99), quantile(took, 0.5), quantile(took, 0.99), len(msgs))
		})
	}
}

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}
