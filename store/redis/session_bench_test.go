package redis_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/redis"
	"github.com/tenurehq/tenure/storetest"
)

// BenchmarkSessionIdle measures what an idle session holding N grants
// costs, as issue 13 measured electors: TTL 10s, a keep-alive every TTL/3,
// counted over a 15s idle window by the server itself (INFO). Run it with
//
//	go test -run '^$' -bench SessionIdle -benchtime 1x ./store/redis/
//
// It reports, per N: requests/s the server received from the client
// (EVALSHA calls), commands/s the server counted including those run
// inside scripts (total_commands_processed, less the benchmark's INFO),
// the server's CPU (% of a core, INFO cpu) and its time per keep-alive
// script, and the client's CPU (getrusage) and heap.
func BenchmarkSessionIdle(b *testing.B) {
	benchIdle(b, []int{1, 100, 1000, 10000}, idleSession)
}

// BenchmarkSessionElectors is BenchmarkSessionIdle through the library:
// N electors leading N keys through one [tenure.Session] (TTL 10s), the
// time until all lead, then the same figures over a 15s idle window. Run
// it with -run '^$' -bench SessionElectors -benchtime 1x.
func BenchmarkSessionElectors(b *testing.B) {
	benchIdle(b, []int{1, 1000, 10000}, idleElectors)
}

// benchIdle runs measure, b.N times, in a sub-benchmark N=n for each n of
// sizes, on one Redis server and store, with a TTL of 10s and an idle
// window of 15s.
func benchIdle(b *testing.B, sizes []int, measure func(b *testing.B, st *redis.Store, c *goredis.Client, n int, ttl, window time.Duration)) {
	srv := testserver.Redis(b, false)
	st, c := open(b, srv.URL(0)), client(b, srv)
	for _, n := range sizes {
		b.Run(fmt.Sprint("N=", n), func(b *testing.B) {
			for range b.N {
				measure(b, st, c, n, 10*time.Second, 15*time.Second)
			}
		})
	}
}

// idleElectors runs n electors through one session until they all lead,
// reports how long that took, and what the next window of idle leading
// cost.
func idleElectors(b *testing.B, st *redis.Store, c *goredis.Client, n int, ttl, window time.Duration) {
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: ttl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	prefix := randomKey()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = prefix + "-" + strconv.Itoa(i)
	}
	elected, stop := storetest.LeadAll(b, sess, "alpha", keys, 3*time.Minute)
	b.ReportMetric(elected.Seconds(), "s-to-elect-all")
	runtime.GC()
	before, cpu0, start := serverStats(b, c), rusage(), time.Now()
	time.Sleep(window) // idle leading is what is measured
	after, cpu1, took := serverStats(b, c), rusage(), time.Since(start)
	report(b, before, after, cpu1-cpu0, took)
	stop()
	if err := sess.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
}

// report reports the figures of a window that took took, between the
// server's counters before and after and the client's CPU time used.
func report(b *testing.B, before, after map[string]float64, cpu, took time.Duration) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	sec := took.Seconds()
	reqs := after["cmdstat_evalsha.calls"] - before["cmdstat_evalsha.calls"]
	cmds := after["total_commands_processed"] - before["total_commands_processed"] - 1
	usec := after["cmdstat_evalsha.usec"] - before["cmdstat_evalsha.usec"]
	srvCPU := after["used_cpu_user"] + after["used_cpu_sys"] - before["used_cpu_user"] - before["used_cpu_sys"]
	b.ReportMetric(reqs/sec, "req/s")
	b.ReportMetric(cmds/sec, "srvcmd/s")
	b.ReportMetric(100*srvCPU/sec, "%srvcpu")
	b.ReportMetric(usec/max(reqs, 1), "µs/keepalive")
	b.ReportMetric(100*cpu.Seconds()/sec, "%clientcpu")
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "MiB-heap")
}

// idleSession opens a session with n grants, keeps it alive for window
// and reports what that cost.
func idleSession(b *testing.B, st *redis.Store, c *goredis.Client, n int, ttl, window time.Duration) {
	ctx := context.Background()
	ss, err := st.OpenSession(ctx, ttl)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close(ctx)
	acquireMany(b, ss, n)
	if gone, err := ss.KeepAlive(ctx); err != nil || len(gone) != 0 { // loads the script
		b.Fatalf("KeepAlive: %d gone, %v", len(gone), err)
	}
	runtime.GC()
	before, cpu0 := serverStats(b, c), rusage()
	start := time.Now()
	tick := time.NewTicker(ttl / 3)
	for now := range tick.C {
		if now.Sub(start) > window {
			break
		}
		if gone, err := ss.KeepAlive(ctx); err != nil || len(gone) != 0 {
			b.Fatalf("KeepAlive: %d gone, %v", len(gone), err)
		}
	}
	tick.Stop()
	after, cpu1, took := serverStats(b, c), rusage(), time.Since(start)
	report(b, before, after, cpu1-cpu0, took)
}

// acquireMany fills ss with n grants, eight at a time.
func acquireMany(b *testing.B, ss tenure.StoreSession, n int) {
	prefix := randomKey()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				if _, err := ss.Acquire(context.Background(), prefix+"-"+strconv.Itoa(i), "alpha", ""); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// serverStats reads the server's counters: INFO stats, cpu and
// commandstats, the latter as cmdstat_NAME.calls and cmdstat_NAME.usec.
func serverStats(b *testing.B, c *goredis.Client) map[string]float64 {
	info, err := c.Info(context.Background(), "stats", "cpu", "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	m := map[string]float64{}
	for _, line := range strings.Split(info, "\r\n") {
		name, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if strings.HasPrefix(name, "cmdstat_") {
			for _, kv := range strings.Split(val, ",") {
				k, v, _ := strings.Cut(kv, "=")
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					m[name+"."+k] = f
				}
			}
			continue
		}
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			m[name] = f
		}
	}
	return m
}

// rusage is the CPU time this process used so far.
func rusage() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
