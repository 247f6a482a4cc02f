package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/testserver"
)

// BenchmarkHTTPIdle measures what --http costs a leading `tenure run`
// that is otherwise idle, scraped like Prometheus does: GET /metrics every
// 15 s (4 scrapes a minute). It runs three such leaders side by side, each
// on a local store directory of its own (leaders that share a directory
// wake on each other's renewals, a cost of the directory's traffic, not of
// the process), two without --http and one with it, so all see the same
// machine load over the same window, $TENURE_IDLE_WINDOW
// (default 60s); it prints each process's CPU over the window from its
// threads' schedstat (ns), with its supervisor's. The difference between
// the two without --http is the noise floor; the difference between their
// mean and the one with --http is --http's cost. The target: under 0.1 %
// of a core with --http. TENURE_BENCH_TENURE names another tenure binary
// to run instead of this tree's, to compare two builds on one machine.
//
//	go test -run '^$' -bench HTTPIdle -benchtime 1x ./cmd/tenure
func BenchmarkHTTPIdle(b *testing.B) {
	useOtherTenure(b)
	window := 60 * time.Second
	if s := os.Getenv("TENURE_IDLE_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("TENURE_IDLE_WINDOW=%q: %v", s, err)
		}
		window = d
	}
	for i := 0; i < b.N; i++ {
		addr := testserver.FreeAddr(b)
		plain := startIdleLeader(b, "file://"+b.TempDir(), "plain", "")
		plain2 := startIdleLeader(b, "file://"+b.TempDir(), "plain2", "")
		web := startIdleLeader(b, "file://"+b.TempDir(), "web", addr)
		scrape := scraper(b, addr)
		scrape() // opens the kept-alive connection, as Prometheus's first scrape does
		plain.mark(b)
		plain2.mark(b)
		web.mark(b)
		start := time.Now()
		scrapes := 0
		for ; scrapes*15 < int(window/time.Second); scrapes++ {
			if scrapes > 0 {
				time.Sleep(15 * time.Second) // the scrape interval: the thing measured
			}
			scrape()
		}
		time.Sleep(time.Until(start.Add(window)))
		took := time.Since(start)
		p, p2, w := plain.share(b, took), plain2.share(b, took), web.share(b, took)
		fmt.Printf("\n  three idle leading `tenure run`s side by side over %s, CPU share of one core (threads' schedstat):\n", took.Round(time.Millisecond))
		fmt.Printf("    without --http:                       %.4f%% (supervisor %.4f%%)\n", p.tenure, p.super)
		fmt.Printf("    without --http, the second one:       %.4f%% (supervisor %.4f%%)\n", p2.tenure, p2.super)
		fmt.Printf("    with --http, %d scrapes of /metrics:   %.4f%% (supervisor %.4f%%)\n", scrapes, w.tenure, w.super)
		mean := (p.tenure + p2.tenure) / 2
		fmt.Printf("    --http's cost: %+.4f%% of a core (noise floor: the two without differ by %.4f%%)\n", w.tenure-mean, math.Abs(p.tenure-p2.tenure))
		if load, err := os.ReadFile("/proc/loadavg"); err == nil {
			fmt.Printf("    load average at the end: %s\n", strings.Join(strings.Fields(string(load))[:3], " "))
		}
		b.ReportMetric(mean, "cpu-%")
		b.ReportMetric(w.tenure, "http-cpu-%")
		b.ReportMetric(0, "ns/op")
	}
}

// shares are CPU shares of one core, in percent.
type shares struct{ tenure, super float64 }

// idleLeader is a leading `tenure run` whose command sleeps.
type idleLeader struct {
	pid, super int   // tenure's and its supervisor's
	ns0, sns0  int64 // their CPU at the start of the window
}

// startIdleLeader starts `tenure run` on key (with --http addr unless addr
// is "") and returns once its command runs; it is stopped when b ends.
func startIdleLeader(b *testing.B, store, key, addr string) *idleLeader {
	args := []string{"run", "--store", store, "--key", key, "--quiet"}
	if addr != "" {
		args = append(args, "--http", addr)
	}
	cmd := exec.Command(tenureBin, append(args, "--", "sh", "-c", "echo leading $$; exec sleep 100000")...)
	br := bufio.NewReader(startPiped(b, cmd, syscall.SIGTERM))
	line, err := br.ReadString('\n')
	var cmdPID int
	if _, perr := fmt.Sscanf(line, "leading %d", &cmdPID); err != nil || perr != nil {
		b.Fatalf("the leader of %s did not start its command: %q, %v", key, line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, br) }()
	return &idleLeader{pid: cmd.Process.Pid, super: ppid(b, cmdPID)} // CMD's parent is the supervisor
}

// mark starts the window.
func (l *idleLeader) mark(b *testing.B) { l.ns0, l.sns0 = cpuNs(b, l.pid), cpuNs(b, l.super) }

// share returns the CPU shares since mark, took ago.
func (l *idleLeader) share(b *testing.B, took time.Duration) shares {
	return shares{
		tenure: float64(cpuNs(b, l.pid)-l.ns0) / float64(took) * 100,
		super:  float64(cpuNs(b, l.super)-l.sns0) / float64(took) * 100,
	}
}

// scraper returns a function that GETs /metrics at addr as a Prometheus
// server would (one kept-alive connection, gzip accepted) and checks the
// answer.
func scraper(b *testing.B, addr string) func() {
	client := &http.Client{Timeout: 10 * time.Second}
	return func() {
		resp, err := client.Get("http://" + addr + "/metrics")
		if err != nil {
			b.Fatalf("scrape: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "leader_election_master_status") {
			b.Fatalf("scrape: %d, %.200s", resp.StatusCode, body)
		}
	}
}
