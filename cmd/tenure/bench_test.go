package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/stats"
)

// failoverTrials is the number of handoffs and crashes each measured.
const failoverTrials = 40

// BenchmarkLocalFailover measures, on the local store with three `tenure
// run` candidates:
//
//   - graceful handoff: the leader's CMD exits → the next leader's CMD starts
//     (stop marker to start marker, both CLOCK_MONOTONIC);
//   - SIGTERM handoff (a rolling deploy): SIGTERM of the leading `tenure
//     run` → the next leader's CMD starts;
//   - crash failover: SIGKILL of the leading `tenure run` → the next
//     leader's CMD starts.
//
// It reports the median and p99 of each, breaks the SIGTERM handoff down
// into its steps (see timeline.go), and fails if two leaders' CMDs ever
// ran at once (see checkHistory). Run it with
//
//	go test -bench Failover -run '^$' ./cmd/tenure/
func BenchmarkLocalFailover(b *testing.B) {
	trials := max(failoverTrials, b.N)
	graceful := measureGraceful(b, trials, "", []string{"--ttl", "1s"})
	sigterm := measureSigterm(b, trials, "", "")
	crash := measureCrash(b, trials)
	fmt.Printf("\n  %-36s %8s %8s %8s %8s\n", fmt.Sprintf("local store, %d trials each", trials), "p50", "p99", "min", "max")
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"graceful (CMD exits → next CMD)", graceful.durations()}, {"sigterm (SIGTERM tenure → next CMD)", sigterm.durations()}, {"crash (SIGKILL tenure → next CMD)", crash.durations()}} {
		fmt.Printf("  %-36s %8s %8s %8s %8s\n", m.name, ms(pct(m.d, 50)), ms(pct(m.d, 99)), ms(slices.Min(m.d)), ms(slices.Max(m.d)))
	}
	printBreakdown("local sigterm", sigterm.steps)
	for _, m := range []struct {
		name string
		r    handoffRun
	}{{"graceful", graceful}, {"sigterm", sigterm}, {"crash", crash}} {
		b.ReportMetric(float64(pct(m.r.durations(), 50))/1e6, m.name+"-p50-ms")
		b.ReportMetric(float64(pct(m.r.durations(), 99))/1e6, m.name+"-p99-ms")
	}
	b.ReportMetric(0, "ns/op")
}

// handoffRun is what one measurement saw: its handoffs and, per handoff,
// when each step of it happened (see breakdown).
type handoffRun struct {
	handoffs []handoff
	steps    []map[string]time.Duration
}

func (r handoffRun) durations() []time.Duration { return durations(r.handoffs) }

// timelineCluster is a cluster of three candidates (flags runArgs, worker,
// or the lean worker if it is "", with workArgs as CMD) on the local store,
// or on storeURL if it is not "", which record their steps in the returned
// timeline file.
func timelineCluster(b *testing.B, storeURL, worker string, runArgs, workArgs []string) (*cluster, string) {
	timeline := filepath.Join(b.TempDir(), "timeline")
	b.Setenv(envTimeline, timeline)
	c := testCluster(b, "bench", append([]string{"--quiet", "--restart"}, runArgs...), workArgs)
	c.worker = cmp.Or(worker, leanWorkerBin)
	if storeURL != "" {
		c.storeURL = storeURL
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.start(id); err != nil {
			b.Fatal(err)
		}
	}
	return c, timeline
}

// measureGraceful lets leaders hand over by exiting: each CMD exits by
// itself after a while and its candidate (--restart) campaigns again. The
// candidates use the local store, or storeURL if it is not "".
func measureGraceful(b *testing.B, trials int, storeURL string, runArgs []string) handoffRun {
	c, timeline := timelineCluster(b, storeURL, "", runArgs, []string{"--exit-after", "100ms"})
	var hs []handoff
	next := 0
	for len(hs) < trials {
		stop, i, ok := c.events.waitFor(next, wait, func(e workerEvent) bool { return e.Kind == "stop" })
		if !ok {
			b.Fatalf("no CMD exited within %s", wait)
		}
		start, j, ok := c.events.nextStart(i+1, wait)
		if !ok {
			b.Fatalf("no CMD started within %s of the last exit", wait)
		}
		hs = append(hs, handoff{stop.Mono, start.Mono})
		next = j + 1
	}
	c.stopAll(10 * time.Second)
	checkNoOverlap(b, "graceful", c.events.events())
	return handoffRun{hs, breakdown(readTimeline(b, timeline), c.events.events(), hs)}
}

// measureCrash kills the leading tenure with SIGKILL, then restarts it as a
// candidate so that three always run.
func measureCrash(b *testing.B, trials int) handoffRun {
	return measureKill(b, trials, syscall.SIGKILL, "crash", "", "")
}

// measureSigterm stops the leading tenure with SIGTERM, as a rolling deploy
// does: tenure forwards it to CMD's group, waits for CMD, releases and
// exits. It is then restarted as a candidate so that three always run. The
// candidates use the local store, or storeURL if it is not "", and run
// worker as CMD (the lean worker if it is "").
func measureSigterm(b *testing.B, trials int, storeURL, worker string) handoffRun {
	return measureKill(b, trials, syscall.SIGTERM, "sigterm", storeURL, worker)
}

// measureKill sends sig to the leading tenure and measures until the next
// leader's CMD starts, then restarts the victim as a candidate. The
// candidates use the local store, or storeURL if it is not "", with worker
// as CMD (the lean worker if it is "").
func measureKill(b *testing.B, trials int, sig syscall.Signal, what, storeURL, worker string) handoffRun {
	c, timeline := timelineCluster(b, storeURL, worker, []string{"--ttl", "10s"}, nil)
	leader, i, ok := c.events.nextStart(0, wait)
	if !ok {
		b.Fatal("no leader")
	}
	var hs []handoff
	for len(hs) < trials {
		victim := c.get(leader.ID)
		t0 := monoNow()
		_ = victim.Cmd.Process.Signal(sig)
		ev, j, ok := c.events.nextStart(i+1, wait)
		if !ok {
			b.Fatalf("no new leader within %s of killing %s", wait, leader.ID)
		}
		hs = append(hs, handoff{t0, ev.Mono})
		<-victim.Done
		if _, err := c.start(victim.ID); err != nil {
			b.Fatal(err)
		}
		// Pace the trials: let the restarted candidate finish starting
		// (it is a fresh tenure process) before the next crash.
		time.Sleep(200 * time.Millisecond)
		leader, i = ev, j
	}
	c.stopAll(10 * time.Second)
	checkNoOverlap(b, what, c.events.events())
	return handoffRun{hs, breakdown(readTimeline(b, timeline), c.events.events(), hs)}
}

func checkNoOverlap(b *testing.B, what string, evs []workerEvent) {
	h := checkHistory(evs)
	if h.Overlaps != 0 || !h.TermsGrow {
		for _, e := range evs {
			b.Logf("%+v", e)
		}
		b.Fatalf("%s: %d overlapping leaders, terms growing: %v, over %d terms", what, h.Overlaps, h.TermsGrow, h.Starts)
	}
	fmt.Printf("  %-8s %d terms, overlap %d, terms %d → %d strictly increasing\n", what, h.Starts, h.Overlaps, h.FirstTerm, h.LastTerm)
}

// pct is the p-th percentile of d (nearest rank).
func pct(d []time.Duration, p float64) time.Duration { return stats.Percentile(d, p) }

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/1e6) }

// BenchmarkRunIdle measures what one leading `tenure run` costs while
// nothing happens (TTL 10s: a renewal every ~3.3s): its CPU share over 10s,
// from /proc/<pid>/stat (clock ticks) and from the threads' schedstat (ns),
// and its live heap and goroutines (TENURE_DEBUG_STATS). The supervisor's
// CPU is reported too. It takes about 12 seconds.
func BenchmarkRunIdle(b *testing.B) {
	const window = 10 * time.Second
	dir := b.TempDir()
	events, err := newEventLog(filepath.Join(dir, "events"))
	if err != nil {
		b.Fatal(err)
	}
	defer events.Close()
	cmd := exec.Command(tenureBin, "run", "--store", "file://"+dir+"/state", "--key", "idle", "--quiet", "--",
		leanWorkerBin, "--events", events.f.Name(), "--lock", filepath.Join(dir, "lock"))
	cmd.Env = append(os.Environ(), "TENURE_DEBUG_STATS=1")
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer pr.Close()
	cmd.Stderr = pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		b.Fatal(err)
	}
	statsLines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "tenure-stats ") {
				statsLines <- sc.Text()
			}
		}
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	ev, _, ok := events.nextStart(0, wait)
	if !ok {
		b.Fatal("the elector did not lead")
	}
	super := ppid(b, ev.PID)
	ticks0, ns0 := cpuTicks(b, cmd.Process.Pid), cpuNs(b, cmd.Process.Pid)
	sticks0, sns0 := cpuTicks(b, super), cpuNs(b, super)
	time.Sleep(window)
	ticks1, ns1 := cpuTicks(b, cmd.Process.Pid), cpuNs(b, cmd.Process.Pid)
	sticks1, sns1 := cpuTicks(b, super), cpuNs(b, super)
	tick := 1e9 / 100.0 // USER_HZ
	statShare := float64(ticks1-ticks0) * tick / float64(window) * 100
	schedShare := float64(ns1-ns0) / float64(window) * 100
	superShare := float64(sns1-sns0) / float64(window) * 100
	// Now the heap, on demand: the stats goroutine slept until here.
	if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		b.Fatal(err)
	}
	var heap, goroutines int64
	select {
	case line := <-statsLines:
		heap, goroutines = parseStats(line)
	case <-time.After(wait):
		b.Fatal("no stats from tenure run after SIGUSR1")
	}
	fmt.Printf("\n  idle leading `tenure run` over %s: CPU %.4f%% of a core (threads' schedstat), %.2f%% (/proc/pid/stat: %d ticks of 10ms); supervisor %.4f%% (%d ticks)\n",
		window, schedShare, statShare, ticks1-ticks0, superShare, sticks1-sticks0)
	fmt.Printf("  live heap after GC %d bytes (%.1f KiB), %d goroutines\n", heap, float64(heap)/1024, goroutines)
	b.ReportMetric(schedShare, "cpu-%")
	b.ReportMetric(float64(heap)/1024, "heap-KiB")
	b.ReportMetric(float64(goroutines), "goroutines")
	b.ReportMetric(superShare, "supervisor-cpu-%")
	b.ReportMetric(0, "ns/op")
}

// parseStats reads the last tenure-stats line of a debug-stats output.
func parseStats(out string) (heap, goroutines int64) {
	heap, goroutines = -1, -1
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		for _, f := range strings.Fields(sc.Text()) {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "live_heap_bytes":
				heap = n
			case "goroutines":
				goroutines = n
			}
		}
	}
	return heap, goroutines
}

// statFields returns the fields of /proc/pid/stat after the command name.
func statFields(b *testing.B, pid int) []string {
	f, ok := procStat(pid)
	if !ok {
		b.Fatalf("cannot read /proc/%d/stat", pid)
	}
	return f
}

// cpuTicks is utime+stime of pid (fields 14 and 15 of /proc/pid/stat).
func cpuTicks(b *testing.B, pid int) int64 {
	f := statFields(b, pid)
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

func ppid(b *testing.B, pid int) int {
	p, _ := strconv.Atoi(statFields(b, pid)[1])
	return p
}

// cpuNs is the CPU time of all of pid's threads, in ns, from schedstat.
func cpuNs(b *testing.B, pid int) int64 {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var sum int64
	for _, t := range tasks {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread exited
		}
		n, _ := strconv.ParseInt(strings.Fields(string(data))[0], 10, 64)
		sum += n
	}
	return sum
}

// BenchmarkElectorIdleHeap measures what a leading library elector on the
// local store adds to a process: live heap after GC and goroutines, once
// it has renewed a few times (TTL 600ms, about 3s). The `tenure run`
// process measured by BenchmarkRunIdle carries more: the package
// initialisation of every store SDK linked into the binary.
func BenchmarkElectorIdleHeap(b *testing.B) {
	store, err := tenure.Open(context.Background(), "file://"+b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/sched/goroutines:goroutines"}}
	read := func() (uint64, uint64) {
		runtime.GC()
		runtime.GC()
		metrics.Read(samples)
		return samples[0].Value.Uint64(), samples[1].Value.Uint64()
	}
	heap0, g0 := read()
	elected := make(chan struct{}, 1)
	el, err := tenure.New(tenure.Config{Store: store, Key: "idle", Identity: "bench", TTL: 600 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- el.Run(ctx, func(ctx context.Context) error {
			elected <- struct{}{}
			<-ctx.Done()
			return nil
		})
	}()
	<-elected
	time.Sleep(3 * time.Second) // several renewals: steady state
	heap1, g1 := read()
	if !el.Status().Leading {
		b.Fatal("the elector lost leadership while idle")
	}
	cancel()
	<-done
	delta := int64(heap1) - int64(heap0)
	fmt.Printf("\n  leading library elector on the local store: live heap +%d bytes (%.1f KiB), +%d goroutines\n",
		delta, float64(delta)/1024, int64(g1)-int64(g0))
	b.ReportMetric(float64(delta)/1024, "heap-KiB")
	b.ReportMetric(float64(int64(g1)-int64(g0)), "goroutines")
	b.ReportMetric(0, "ns/op")
}
