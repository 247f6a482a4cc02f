// Package peertest holds the fixtures the tests of package peer and its
// layers share: a shared secret and its file, and groups on free loopback
// ports. It is imported by tests only.
package peertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/peer/transport"
)

// Secret is a shared secret long and random enough for LoadSecret.
const Secret = "0123456789abcdef0123456789abcdef-test-secret"

// WriteSecret writes content to a fresh secret file (mode 0600) and
// returns its path.
func WriteSecret(t testing.TB, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "peer.secret")
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Group returns members 1..n on free loopback ports.
func Group(t testing.TB, n int) transport.Group {
	t.Helper()
	var ms []transport.Member
	for i := 1; i <= n; i++ {
		ms = append(ms, transport.Member{ID: uint64(i), Addr: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))})
	}
	g, err := transport.NewGroup(ms)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// BenchGet measures r.Get of key, which must name holder, b.N times after
// one call that connects, and reports the median and p99 latency.
func BenchGet(b *testing.B, r tenure.Reader, key, holder string) {
	ctx := context.Background()
	if _, err := r.Get(ctx, key); err != nil { // connect
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		rec, err := r.Get(ctx, key)
		took = append(took, time.Since(start))
		if err != nil || rec.Holder != holder {
			b.Fatalf("Get = %+v, %v", rec, err)
		}
	}
	b.StopTimer()
	slices.Sort(took)
	med, p99 := took[len(took)/2], took[min(len(took)-1, len(took)*99/100)]
	b.ReportMetric(float64(med)/1e3, "median-µs")
	b.ReportMetric(float64(p99)/1e3, "p99-µs")
	b.Logf("Get: median %s, p99 %s over %d", med, p99, len(took))
}
