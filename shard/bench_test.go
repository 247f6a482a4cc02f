package shard_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/stats"
	"github.com/tenurehq/tenure/shard"
)

// BenchmarkRebalance measures, in real time on the in-memory store, how
// long a group of 4 members with 64 keys takes to rebalance when a fifth
// member joins (from its Run starting until every key it owns runs its
// task there) and when it leaves gracefully (from its Run being cancelled
// until every key it led runs its task at its new owner), and how many
// keys each change moved. It prints the median and p99 of each:
//
//	go test -run '^$' -bench Rebalance -benchtime 50x ./shard
func BenchmarkRebalance(b *testing.B) {
	const k, n = 64, 4
	members := ids(n + 1)
	c := newCluster(b, members, shard.Numbered(k), time.Second)
	for _, id := range members[:n] {
		c.start(id)
	}
	c.settle(c.now(), 10*time.Second)
	var joins, leaves []time.Duration
	var movedJoin, movedLeave int
	b.ResetTimer()
	for b.Loop() {
		before, at := c.leaders(), c.now()
		c.start(members[n])
		joins = append(joins, c.settle(at, 10*time.Second))
		mid := c.leaders()
		movedJoin += moved(before, mid)

		at = c.now()
		c.stop(members[n])
		leaves = append(leaves, c.settle(at, 10*time.Second))
		movedLeave += moved(mid, c.leaders())
	}
	b.StopTimer()
	for _, id := range c.live() {
		c.stop(id)
	}
	c.check()
	runs := len(joins)
	b.ReportMetric(float64(stats.Percentile(joins, 50).Microseconds())/1000, "join-p50-ms")
	b.ReportMetric(float64(stats.Percentile(joins, 99).Microseconds())/1000, "join-p99-ms")
	b.ReportMetric(float64(stats.Percentile(leaves, 50).Microseconds())/1000, "leave-p50-ms")
	b.ReportMetric(float64(stats.Percentile(leaves, 99).Microseconds())/1000, "leave-p99-ms")
	b.ReportMetric(float64(movedJoin)/float64(runs), "moved/join")
	b.ReportMetric(float64(movedLeave)/float64(runs), "moved/leave")
	fmt.Printf("rebalance, K=%d, %d→%d→%d members, %d runs: join p50 %s p99 %s; leave p50 %s p99 %s; keys moved per join %.1f, per leave %.1f (K/n = %.1f)\n",
		k, n, n+1, n, runs, stats.Percentile(joins, 50), stats.Percentile(joins, 99),
		stats.Percentile(leaves, 50), stats.Percentile(leaves, 99),
		float64(movedJoin)/float64(runs), float64(movedLeave)/float64(runs), float64(k)/float64(n+1))
}
