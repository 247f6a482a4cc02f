// Package peertest holds the fixtures the tests of package peer and its
// layers share: a shared secret and its file, groups on free loopback
// ports, a Get benchmark and the reading of a watch across a change of
// leader. It is imported by tests only.
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

// WatchFrom starts a watch of key on r and checks that its first record
// names the holder and term of want, the record a Get returned just
// before. It returns the watch for the test to read on.
func WatchFrom(t testing.TB, ctx context.Context, r tenure.Reader, key string, want tenure.Record) <-chan tenure.Record {
	t.Helper()
	w, err := r.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if first := <-w; first.Holder != want.Holder || first.Term != want.Term {
		t.Fatalf("first watch record %+v, want %+v", first, want)
	}
	return w
}

// NextHolder reads w until a record names want (any holder if want is "")
// with a term above after, failing t after d or if the watch ends. It
// fails too if a held record has a term below after: the watch went back.
func NextHolder(t testing.TB, w <-chan tenure.Record, want string, after uint64, d time.Duration) tenure.Record {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var seen []tenure.Record
	for {
		select {
		case r, ok := <-w:
			if !ok {
				t.Fatalf("the watch ended; records so far %+v", seen)
			}
			seen = append(seen, r)
			if r.Held() && r.Term < after {
				t.Fatalf("the watch went back to term %d after %d: %+v", r.Term, after, seen)
			}
			if r.Held() && r.Term > after && (want == "" || r.Holder == want) {
				return r
			}
		case <-timer.C:
			t.Fatalf("no record of %q above term %d within %s; got %+v", want, after, d, seen)
		}
	}
}
