package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/internal/testserver/etcdtest"
)

// benchStores are the stores BenchmarkStoreHandoff measures: each returns
// the URL of a fresh key space on a test server it starts (skipping the
// benchmark if the server is not installed).
var benchStores = []struct {
	name string
	url  func(b *testing.B) string
}{
	{"local", func(b *testing.B) string { return "file://" + b.TempDir() }},
	{"redis", func(b *testing.B) string { return testserver.Redis(b, false).URL(0) }},
	{"etcd", func(b *testing.B) string { return "etcd://" + etcdtest.Start(b).Endpoint + "/bench" }},
	{"zookeeper", func(b *testing.B) string { return "zk://" + testserver.ZooKeeper(b).Addr + "/bench" }},
	{"postgres", func(b *testing.B) string { return testserver.Postgres(b).URL() }},
}

// BenchmarkStoreHandoff measures, for the local store and each server
// store, with three `tenure run` candidates (--ttl 10s, the lean worker as
// CMD):
//
//   - graceful: the leader's CMD exits → the next leader's CMD starts;
//   - sigterm, the handoff a rolling deploy causes: SIGTERM of the leading
//     `tenure run` → the next leader's CMD starts;
//   - the same with a CMD written in C (testdata/cworker, built with cc if
//     there is one), whose own start takes well under a millisecond where
//     the lean worker's Go runtime takes several: what is left is tenure's;
//
// and beside them, on the same server, the library-level handoff: the
// leading elector's Run cancelled → the next elector's task starts (three
// electors in this process, as many as candidates). It prints the median
// and p99 of each, what `tenure run` adds to the library's median, and
// the SIGTERM handoff broken down into its steps (see timeline.go); it
// fails if two CMDs ever ran at once. TENURE_BENCH_TRIALS sets the trials
// per store and case (default 20); TENURE_BENCH_TENURE names another
// tenure binary to run as the candidates, to compare two builds back to
// back (its steps are not broken down unless it records them too):
//
//	go test -bench StoreHandoff -run '^$' ./cmd/tenure/
func BenchmarkStoreHandoff(b *testing.B) {
	trials := 20
	if v, err := strconv.Atoi(os.Getenv("TENURE_BENCH_TRIALS")); err == nil && v > 0 {
		trials = v
	}
	useOtherTenure(b)
	cw := cWorker(b)
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			url := st.url(b)
			lib := libraryHandoff(b, url, trials)
			graceful := measureGraceful(b, trials, url, []string{"--ttl", "10s"})
			sigterm := measureSigterm(b, trials, url, "")
			var sigtermC handoffRun
			if cw != "" {
				sigtermC = measureKill(b, trials, syscall.SIGTERM, "sigterm, C CMD", url, cw)
				b.ReportMetric(float64(pct(sigtermC.durations(), 50))/1e6, "sigterm-c-p50-ms")
			}
			printStoreHandoff(st.name, lib, graceful.durations(), sigterm.durations(), sigtermC.durations())
			printBreakdown(st.name+" graceful", graceful.steps)
			printBreakdown(st.name+" sigterm", sigterm.steps)
			if cw != "" {
				printBreakdown(st.name+" sigterm, C CMD", sigtermC.steps)
			}
			b.ReportMetric(float64(pct(lib, 50))/1e6, "library-p50-ms")
			b.ReportMetric(float64(pct(graceful.durations(), 50))/1e6, "graceful-p50-ms")
			b.ReportMetric(float64(pct(sigterm.durations(), 50))/1e6, "sigterm-p50-ms")
			b.ReportMetric(float64(pct(sigterm.durations(), 99))/1e6, "sigterm-p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// useOtherTenure makes b run the tenure binary named by
// $TENURE_BENCH_TENURE, if set, instead of the one built from this tree.
func useOtherTenure(b *testing.B) {
	if bin := os.Getenv("TENURE_BENCH_TENURE"); bin != "" {
		old := tenureBin
		tenureBin = bin
		b.Cleanup(func() { tenureBin = old })
	}
}

// printStoreHandoff prints one store's figures: p50 / p99 of each case
// and, for the CLI's cases, their p50 minus the library's. sigtermC is
// left out if empty (no C compiler).
func printStoreHandoff(store string, lib, graceful, sigterm, sigtermC []time.Duration) {
	fmt.Printf("\n  %-10s %-34s %-20s %s\n", store, "case", "p50 / p99", "p50 − library p50")
	l50 := pct(lib, 50)
	for _, c := range []struct {
		name string
		d    []time.Duration
	}{{"library (Run cancelled → next task)", lib}, {"graceful (CMD exits → next CMD)", graceful}, {"sigterm (SIGTERM tenure → next CMD)", sigterm},
		{"sigterm, C CMD", sigtermC}} {
		if len(c.d) == 0 {
			continue
		}
		extra := ""
		if c.name[0] != 'l' {
			extra = ms(pct(c.d, 50) - l50)
		}
		fmt.Printf("  %-10s %-34s %-20s %s\n", "", c.name, ms(pct(c.d, 50))+" / "+ms(pct(c.d, 99)), extra)
	}
}

// libraryHandoff measures trials handoffs among three electors on the
// store at url: from cancelling the leader's Run (which releases the
// lease) until the other elector's task starts.
func libraryHandoff(b *testing.B, url string, trials int) []time.Duration {
	ctx := context.Background()
	started := make(chan int, 3)
	type member struct {
		el     *tenure.Elector
		cancel context.CancelFunc
		done   chan struct{}
	}
	var m [3]member
	run := func(i int) {
		rctx, cancel := context.WithCancel(ctx)
		m[i].cancel, m[i].done = cancel, make(chan struct{})
		go func() {
			defer close(m[i].done)
			_ = m[i].el.Run(rctx, func(ctx context.Context) error {
				started <- i
				<-ctx.Done()
				return nil
			})
		}()
	}
	for i := range m {
		store, err := tenure.Open(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { store.Close() })
		m[i].el, err = tenure.New(tenure.Config{Store: store, Key: "bench-lib", Identity: fmt.Sprint("lib-", i),
			TTL: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		run(i)
	}
	b.Cleanup(func() {
		for i := range m {
			m[i].cancel()
			<-m[i].done
		}
	})
	leader := <-started
	var out []time.Duration
	for len(out) < trials {
		time.Sleep(100 * time.Millisecond) // pace: the others are watching
		t0 := time.Now()
		m[leader].cancel()
		next := <-started
		out = append(out, time.Since(t0))
		<-m[leader].done
		run(leader)
		leader = next
	}
	return out
}

// cWorker builds testdata/cworker, the worker in C, with the C compiler
// into a directory of b's, or returns "" if there is no compiler.
func cWorker(b *testing.B) string {
	cc, err := exec.LookPath("cc")
	if err != nil {
		fmt.Println("  no C compiler (cc): the case with a C CMD is left out")
		return ""
	}
	bin := filepath.Join(b.TempDir(), "cworker")
	if out, err := exec.Command(cc, "-O2", "-Wall", "-o", bin, "testdata/cworker/cworker.c").CombinedOutput(); err != nil {
		b.Fatalf("building testdata/cworker: %v\n%s", err, out)
	}
	return bin
}
