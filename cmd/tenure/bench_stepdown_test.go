package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// BenchmarkStepDownTransfer measures the transfer time of a named
// hand-over: from the start of `tenure step-down --to ID` (a new process)
// until ID's CMD is running, with three `tenure run` candidates (--ttl 10s,
// the lean worker as CMD) on the local store and on each server store of
// benchStores that is installed; alternating with those, the same with the
// request made by RequestStepDown in the benchmark's process (no process
// start). Beside it, in this process on the memory store, the library's:
// from RequestStepDown until the named elector's task runs. Every
// transfer must go to the named candidate, and no two CMDs may ever run at
// once. TENURE_BENCH_TRIALS sets the trials of each kind (default 20):
//
//	go test -bench StepDownTransfer -run '^$' ./cmd/tenure/
func BenchmarkStepDownTransfer(b *testing.B) {
	trials := 20
	if v, err := strconv.Atoi(os.Getenv("TENURE_BENCH_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	lib := libraryTransfer(b, trials)
	fmt.Printf("\n  %-36s %10s %10s %10s %10s\n", fmt.Sprintf("step-down → named CMD, %d trials", trials), "p50", "p99", "min", "max")
	printRow := func(name string, d []time.Duration) {
		fmt.Printf("  %-36s %10s %10s %10s %10s\n", name, ms(pct(d, 50)), ms(pct(d, 99)), ms(slices.Min(d)), ms(slices.Max(d)))
	}
	printRow("memory (library, in-process)", lib)
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			cli, req := cliTransfer(b, st.url(b), trials)
			printRow(st.name+": tenure step-down", cli)
			printRow(st.name+": RequestStepDown", req)
			b.ReportMetric(float64(pct(cli, 50))/1e6, "p50-ms")
			b.ReportMetric(float64(pct(cli, 99))/1e6, "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// cliTransfer measures named transfers among three `tenure run`
// candidates on the store at url: trials requested by `tenure step-down`
// (cli) and, alternating, trials by RequestStepDown in this process (req).
func cliTransfer(b *testing.B, url string, trials int) (cli, req []time.Duration) {
	store, err := tenure.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	c := testCluster(b, "bench", []string{"--quiet", "--ttl", "10s"}, nil)
	c.worker, c.storeURL = leanWorkerBin, url
	ids := []string{"a", "b", "c"}
	leader, i := startCandidates(b, c, ids...)
	time.Sleep(time.Second) // every candidate is up and watching
	for n := 0; len(req) < trials; n++ {
		to := otherThan(leader.ID, ids[(n+1)%3], ids[(n+2)%3])
		t0 := monoNow()
		var grant tenure.Lease
		if n%2 == 0 {
			r := runTenure(b, "step-down", "--store", url, "--key", "bench", "--to", to, "--window", "5s")
			if r.code != exitOK {
				b.Fatalf("step-down: exit %d: %s", r.code, r.stderr)
			}
		} else {
			sd, err := tenure.RequestStepDown(context.Background(), store, "bench", tenure.StepDownRequest{To: to, Window: 5 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			grant = sd.Grant
		}
		next, j, ok := c.events.nextStart(i+1, wait)
		if !ok || next.ID != to {
			b.Fatalf("transfer %d: next start %+v (found %v), want %s", n, next, ok, to)
		}
		if d := time.Duration(next.Mono - t0); n%2 == 0 {
			cli = append(cli, d)
		} else {
			req = append(req, d)
			_ = store.Release(context.Background(), grant) // as tenure step-down does
		}
		leader, i = next, j
		time.Sleep(200 * time.Millisecond) // pace: the old leader campaigns again
	}
	c.stopAll(10 * time.Second)
	checkNoOverlap(b, "step-down", c.events.events())
	return cli, req
}

// libraryTransfer measures trials named transfers among three electors
// with Config.Control on one memory store.
func libraryTransfer(b *testing.B, trials int) []time.Duration {
	store := memory.New(nil)
	started := make(chan string, 3)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		el, err := tenure.New(tenure.Config{Store: store, Key: "bench", Identity: id, TTL: 10 * time.Second,
			Logger: slog.New(slog.DiscardHandler), Control: &tenure.Control{Priority: 1}})
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			_ = el.Run(ctx, func(ctx context.Context) error {
				started <- id
				<-ctx.Done()
				return nil
			})
			done <- struct{}{}
		}()
	}
	defer func() {
		cancel()
		for range ids {
			<-done
		}
	}()
	leader := <-started
	var out []time.Duration
	for n := 0; len(out) < trials; n++ {
		time.Sleep(100 * time.Millisecond)
		to := otherThan(leader, ids[(n+1)%3], ids[(n+2)%3])
		t0 := time.Now()
		sd, err := tenure.RequestStepDown(ctx, store, "bench", tenure.StepDownRequest{To: to, Window: 5 * time.Second})
		if err != nil {
			b.Fatal(err)
		}
		if next := <-started; next != to {
			b.Fatalf("transfer %d went to %s, want %s", n, next, to)
		}
		out = append(out, time.Since(t0))
		_ = store.Release(ctx, sd.Grant)
		leader = to
	}
	return out
}
