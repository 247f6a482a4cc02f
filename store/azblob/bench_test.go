package azblob_test

import (
	"testing"

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
// failover by the 15 s lease plus one poll interval.
func BenchmarkFailover(b *testing.B) {
	srv := testserver.Azurite(b)
	raw := storeURL(srv, "bench", randomName(b))
	storetest.BenchFailover(b, storetest.BenchOptions{
		Open:   func(t testing.TB) tenure.Store { return openURL(t, raw) },
		TTL:    ttl,
		Trials: 20,
	})
}
