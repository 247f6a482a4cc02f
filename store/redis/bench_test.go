package redis_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/storetest"
)

// BenchmarkFailover measures graceful handoff and crash failover through
// real electors. Run it with -run '^$' -bench Failover -benchtime 1x.
func BenchmarkFailover(b *testing.B) {
	srv := testserver.Redis(b, false)
	res := storetest.BenchFailover(b, storetest.BenchOptions{
		Open: func(t testing.TB) tenure.Store {
			st, err := tenure.Open(ctxFor(t), srv.URL(0))
			if err != nil {
				t.Fatalf("tenure.Open: %v", err)
			}
			return st
		},
		TTL:    2 * time.Second,
		Trials: 20,
	})
	b.Logf("graceful samples: %v", sorted(res.Graceful))
	b.Logf("crash samples: %v", sorted(res.Crash))
}

func sorted(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	for i := range s {
		s[i] = s[i].Round(100 * time.Microsecond)
	}
	return s
}
