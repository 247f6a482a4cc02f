package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHTTPIdle measures what --http costs a leading `tenure run`
// that is otherwise idle, scraped like Prometheus does: GET /metrics every
// 15 s. It runs the same leader twice, without --http and with it (the
// scraper only in the second run), each for $TENURE_IDLE_WINDOW (default
// 60s), and prints each process's CPU over the window from its threads'
// schedstat (ns), with the supervisor's; the difference is --http's cost.
// The target: under 0.1 % of a core with --http. It takes about 2×window.
//
//	go test -run '^$' -bench HTTPIdle -benchtime 1x ./cmd/tenure
func BenchmarkHTTPIdle(b *testing.B) {
	window := 60 * time.Second
	if s := os.Getenv("TENURE_IDLE_WINDOW"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("TENURE_IDLE_WINDOW=%q: %v", s, err)
		}
		window = d
	}
	for i := 0; i < b.N; i++ {
		plain, _ := idleShare(b, window, "")
		addr := freeAddr(b)
		withHTTP, scrapes := idleShare(b, window, addr)
		fmt.Printf("\n  idle leading `tenure run` over %s, CPU share of one core (threads' schedstat):\n", window)
		fmt.Printf("    without --http:                         %.4f%% (supervisor %.4f%%)\n", plain.tenure, plain.super)
		fmt.Printf("    with --http, %d scrapes of /metrics:     %.4f%% (supervisor %.4f%%)\n", scrapes, withHTTP.tenure, withHTTP.super)
		fmt.Printf("    --http's cost: %+.4f%% of a core\n", withHTTP.tenure-plain.tenure)
		b.ReportMetric(plain.tenure, "cpu-%")
		b.ReportMetric(withHTTP.tenure, "http-cpu-%")
		b.ReportMetric(0, "ns/op")
	}
}

// shares are CPU shares of one core, in percent.
type shares struct{ tenure, super float64 }

// idleShare starts a leading `tenure run` (with --http addr unless addr is
// ""), waits until its command runs, then measures its and its
// supervisor's CPU over window, scraping /metrics every 15 s from the
// start of the window if addr is set. It returns the shares and the number
// of scrapes in the window.
func idleShare(b *testing.B, window time.Duration, addr string) (shares, int) {
	args := []string{"run", "--store", "file://" + b.TempDir(), "--key", "idle", "--quiet"}
	if addr != "" {
		args = append(args, "--http", addr)
	}
	cmd := exec.Command(tenureBin, append(args, "--", "sh", "-c", "echo leading $$; exec sleep 100000")...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	br := bufio.NewReader(out)
	line, err := br.ReadString('\n')
	var cmdPID int
	if _, perr := fmt.Sscanf(line, "leading %d", &cmdPID); err != nil || perr != nil {
		b.Fatalf("the leader did not start its command: %q, %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, br) }()
	super := ppid(b, cmdPID) // CMD's parent is the supervisor
	scrapes := 0
	scrape := func() {
		if addr == "" {
			return
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			b.Fatalf("scrape: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "leader_election_master_status") {
			b.Fatalf("scrape: %d, %.200s", resp.StatusCode, body)
		}
		scrapes++
	}
	scrape() // opens the kept-alive connection, as Prometheus's first scrape does
	scrapes = 0
	ns0, sns0 := cpuNs(b, cmd.Process.Pid), cpuNs(b, super)
	start := time.Now()
	scrape()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	end := time.After(window)
	for done := false; !done; {
		select {
		case <-tick.C:
			scrape()
		case <-end:
			done = true
		}
	}
	took := time.Since(start)
	ns1, sns1 := cpuNs(b, cmd.Process.Pid), cpuNs(b, super)
	return shares{
		tenure: float64(ns1-ns0) / float64(took) * 100,
		super:  float64(sns1-sns0) / float64(took) * 100,
	}, scrapes
}
