package zk_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// BenchmarkSessionIdle measures what an idle session holding N grants
// costs: the requests the server receives (its own count, mntr's
// zk_packets_received: the session's keep-alives and the client's pings,
// and the control session's pings) per second over a 15 s idle window
// while KeepAlive runs every TTL/3 as a tenure.Session sends it, the
// process's CPU (getrusage) and its heap. Run it alone, once:
//
//	go test -run '^$' -bench SessionIdle -benchtime 1x ./store/zk/
func BenchmarkSessionIdle(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 10000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) { benchIdle(b, n) })
	}
}

func benchIdle(b *testing.B, n int) {
	const ttl, window = 10 * time.Second, 15 * time.Second
	srv := server(b)
	st := opener(srv, fmt.Sprintf("/idle-%d-%d", n, time.Now().UnixNano()))(b)
	ss, err := st.(tenure.SessionStore).OpenSession(context.Background(), ttl)
	if err != nil {
		b.Fatal(err)
	}
	defer ss.Close(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if gone, err := ss.KeepAlive(ctx); (err != nil && ctx.Err() == nil) || len(gone) != 0 {
					b.Errorf("KeepAlive: gone %d, %v", len(gone), err)
					return
				}
			}
		}
	})
	acquireMany(b, ss, n)
	time.Sleep(time.Second) // let the acquisitions' traffic settle
	b.ResetTimer()
	p0, c0, t0 := mntr(b, srv.Addr)["zk_packets_received"], cpuTime(), time.Now()
	time.Sleep(window) // the idle window being measured
	p1, c1, el := mntr(b, srv.Addr)["zk_packets_received"], cpuTime(), time.Since(t0)
	b.StopTimer()
	cancel()
	wg.Wait()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	// One packet of each window is the first mntr's own connection.
	reqs := float64(p1-p0-1) / el.Seconds()
	cpu := 100 * (c1 - c0).Seconds() / el.Seconds()
	b.ReportMetric(reqs, "req/s")
	b.ReportMetric(cpu, "%cpu")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heapMiB")
	b.Logf("N=%d: %.2f req/s at the server, %.2f%% of a core, heap %.1f MiB", n, reqs, cpu, float64(ms.HeapInuse)/(1<<20))
}

// acquireMany acquires n keys in ss, 64 at a time.
func acquireMany(b *testing.B, ss tenure.StoreSession, n int) {
	began := time.Now()
	keys := make(chan int)
	var once sync.Once
	var wg sync.WaitGroup
	for range min(n, 64) {
		wg.Go(func() {
			for i := range keys {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := ss.Acquire(ctx, fmt.Sprintf("k%d", i), "alpha", "")
				cancel()
				if err != nil {
					once.Do(func() { b.Error(err) })
				}
			}
		})
	}
	for i := range n {
		keys <- i
	}
	close(keys)
	wg.Wait()
	b.Logf("N=%d: acquired in %s", n, time.Since(began).Round(time.Millisecond))
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
