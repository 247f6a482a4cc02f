//go:build linux

package local_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
	"github.com/tenurehq/tenure/storetest"
)

// newSession opens a [tenure.Session] of ttl on s, closed when the test
// ends.
func newSession(t testing.TB, s *local.Store, ttl time.Duration) *tenure.Session {
	t.Helper()
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: s, TTL: ttl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("NewSession on the local store: %v", err)
	}
	t.Cleanup(func() { _ = sess.Close(context.Background()) })
	return sess
}

// Electors of one [tenure.Session] on the local store lead their keys,
// which another handle sees held; once they stop and the session closes,
// every key is free at once.
func TestSessionElectors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := open(t, dir), open(t, dir)
	sess := newSession(t, a, 10*time.Second)
	keys := sessionKeys("electors", 100)
	_, stop := storetest.LeadAll(t, sess, "alpha", keys, 30*time.Second)
	for _, key := range []string{keys[0], keys[99]} {
		if r, err := b.Get(context.Background(), key); err != nil || r.Holder != "alpha" {
			t.Fatalf("Get(%q) while the electors lead: %+v, %v", key, r, err)
		}
	}
	stop()
	if err := sess.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, key := range keys {
		l, err := b.Acquire(context.Background(), key, "beta", time.Minute)
		if err != nil || l.Wait != 0 {
			t.Fatalf("Acquire(%q) after the session closed: %+v, %v; want a grant without wait", key, l, err)
		}
	}
}

// BenchmarkSessionElectors runs N electors leading N keys through one
// [tenure.Session] on the local store (TTL 10s): the time until all lead,
// then the process's CPU over a 15s idle window. Run it with
//
//	go test -run '^$' -bench SessionElectors -benchtime 1x ./store/local
func BenchmarkSessionElectors(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			for range b.N {
				s := open(b, b.TempDir())
				sess := newSession(b, s, 10*time.Second)
				elected, stop := storetest.LeadAll(b, sess, "alpha", sessionKeys("idle", n), 3*time.Minute)
				b.ReportMetric(elected.Seconds(), "s-to-elect-all")
				reportIdleCPU(b)
				stop()
				_ = sess.Close(context.Background())
				s.Close()
			}
		})
	}
}

// BenchmarkElectorsWithoutSession is BenchmarkSessionElectors with each
// elector renewing its own key (no session), for comparison.
//
//	go test -run '^$' -bench ElectorsWithoutSession -benchtime 1x ./store/local
func BenchmarkElectorsWithoutSession(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			for range b.N {
				s := open(b, b.TempDir())
				own := tenure.Config{Store: s, Identity: "alpha", TTL: 10 * time.Second}
				elected, stop := storetest.LeadEach(b, own, sessionKeys("idle", n), 3*time.Minute)
				b.ReportMetric(elected.Seconds(), "s-to-elect-all")
				reportIdleCPU(b)
				stop()
				s.Close()
			}
		})
	}
}

// reportIdleCPU reports the process's CPU use over a 15s idle window, as
// %cpu-idle.
func reportIdleCPU(b *testing.B) {
	runtime.GC()
	cpu0, start := rusage(), time.Now()
	time.Sleep(15 * time.Second) // idle leading is what is measured
	cpu, took := rusage()-cpu0, time.Since(start)
	b.ReportMetric(100*cpu.Seconds()/took.Seconds(), "%cpu-idle")
}

// rusage returns the CPU time this process used so far.
func rusage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
