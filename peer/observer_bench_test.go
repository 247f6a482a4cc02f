package peer_test

import (
	"testing"
	"time"

	"github.com/tenurehq/tenure/peer/internal/peertest"
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
	peertest.BenchGet(b, o, "job", "3")
}
