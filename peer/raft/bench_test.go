package raft

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tenurehq/tenure/peer/internal/peertest"
)

// BenchmarkFailover measures, on loopback TCP with the authenticated
// transport and a 100 ms heartbeat timeout, the time from the leader's
// process being stopped to a new leader's successful Acquire (an election
// plus a quorum round), for clusters of 3, 5 and 9. Each iteration kills
// the current leader, waits for the new grant, then restarts the killed
// member from its directory (not timed). It reports the median and p99.
//
//	go test ./peer/raft -run '^$' -bench Failover -benchtime 20x
func BenchmarkFailover(b *testing.B) {
	const hb = 100 * time.Millisecond
	for _, n := range []int{3, 5, 9} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			c := newTCPCluster(b, n, hb)
			ctx := context.Background()
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				li := c.awaitLeader(50*hb, -1)
				b.StartTimer()
				c.stop(li)
				killed := time.Now()
				for {
					ni := c.awaitLeader(50*hb, li)
					if _, err := c.nodes[ni].Acquire(ctx, "k", c.members[ni].ID, hb); err == nil {
						break
					}
				}
				took = append(took, time.Since(killed))
				b.StopTimer()
				c.start(li)
				b.StartTimer()
			}
			b.StopTimer()
			slices.Sort(took)
			med := took[len(took)/2]
			p99 := took[min(len(took)-1, len(took)*99/100)]
			b.ReportMetric(float64(med)/1e6, "median-ms")
			b.ReportMetric(float64(p99)/1e6, "p99-ms")
			b.ReportMetric(0, "ns/op")
			b.Logf("n=%d: failover median %s, p99 %s over %d kills (heartbeat timeout %s)",
				n, med.Round(time.Millisecond), p99.Round(time.Millisecond), len(took), hb)
		})
	}
}

// BenchmarkObserverGet measures an observer's Get on a 3-member cluster on
// loopback (one status request to each member over kept mutual-TLS
// connections, in parallel) and reports the median and p99.
//
//	go test ./peer/raft -run '^$' -bench ObserverGet -benchtime 500x
func BenchmarkObserverGet(b *testing.B) {
	c, urls := openPeerCluster(b, 3)
	li := c.awaitLeader(30*tcpHB, -1)
	peertest.BenchGet(b, openTestObserver(b, observerURL(b, urls[0], "")), "k", c.members[li].ID)
}
