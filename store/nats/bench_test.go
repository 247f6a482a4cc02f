package nats_test

import (
	"testing"

	"github.com/tenurehq/tenure/internal/testserver/natstest"
	"github.com/tenurehq/tenure/storetest"
)

// BenchmarkFailover measures graceful handoff and crash failover through
// real electors. Run it with -run '^$' -bench Failover -benchtime 1x.
func BenchmarkFailover(b *testing.B) {
	storetest.BenchFailover(b, storetest.BenchOptions{Open: storetest.OpenURL(natstest.Start(b).URL("leases"))})
}
