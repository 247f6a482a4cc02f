// Package demoworker is the stand-in leader job of `tenure demo`, of the
// CLI's tests and of its benchmarks: a process that proves, through a lock
// the kernel drops when it dies, that no two of its kind run at once, and
// logs when it starts and stops on CLOCK_MONOTONIC, which every process of a
// machine shares. The tenure binary runs it as `tenure __demo-worker`; the
// benchmarks build it alone (testdata/leanworker), so that what they
// measure is tenure and not the start-up of a large binary.
//
// Guarantees: a start line says "overlap" whenever another worker holding
// the same lock file was still alive (not yet exited) at that moment.
// Non-guarantees: a worker killed by SIGKILL writes no stop line; its end
// is known only through the lock.
package demoworker

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure/internal/history"
)

// MonoNow returns CLOCK_MONOTONIC in nanoseconds.
func MonoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("demoworker: CLOCK_MONOTONIC unavailable: " + err.Error())
	}
	return ts.Nano()
}

// Run is `tenure __demo-worker --events PATH --lock PATH [--heartbeat
// DUR] [--exit-after DUR] [--stop-delay DUR] [--print]`. It stands for a leader's job and
// reports on it:
//
//   - at start it tries to take an exclusive flock on --lock without waiting.
//     The kernel drops the lock when the worker dies, however it dies, so
//     failing to get it means another worker is still alive: two leaders at
//     once. Its start line says "overlap" then.
//   - it appends "start ID TERM MONO PID ok|overlap" to --events (a file or
//     FIFO; one write per line, so lines never interleave), where MONO is
//     CLOCK_MONOTONIC in nanoseconds, comparable across processes;
//   - with --print it prints "ID leads (term TERM)" every --heartbeat;
//   - on SIGTERM, SIGINT or SIGHUP, or after --exit-after, it keeps working
//     (and holding the lock) for --stop-delay, as a job that finishes what
//     it was doing would, then appends "stop ID TERM MONO PID" and exits 0.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("__demo-worker", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	events := fs.String("events", "", "file or FIFO to append events to")
	lock := fs.String("lock", "", "lock file held while working")
	heartbeat := fs.Duration("heartbeat", 500*time.Millisecond, "heartbeat period")
	exitAfter := fs.Duration("exit-after", 0, "exit by itself after this long (0: never)")
	stopDelay := fs.Duration("stop-delay", 0, "keep working this long after being told to stop")
	print := fs.Bool("print", false, "print heartbeats to stdout")
	if err := fs.Parse(args); err != nil || *events == "" || *lock == "" {
		fmt.Fprintln(stderr, "tenure: __demo-worker is internal to tenure demo")
		return 2
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	id, term := os.Getenv("TENURE_ID"), os.Getenv("TENURE_TERM")
	started := MonoNow()

	state := "ok"
	lf, err := os.OpenFile(*lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintf(stderr, "tenure: %v\n", err)
		return 1
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		state = "overlap"
	}
	ev, err := os.OpenFile(*events, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		fmt.Fprintf(stderr, "tenure: %v\n", err)
		return 1
	}
	defer ev.Close()
	pid := os.Getpid()
	fmt.Fprintf(ev, "start %s %s %d %d %s\n", id, term, started, pid, state)

	var tick <-chan time.Time
	if *print {
		t := time.NewTicker(*heartbeat)
		defer t.Stop()
		tick = t.C
		fmt.Fprintf(stdout, "%s leads (term %s)\n", id, term)
	}
	var exit <-chan time.Time
	if *exitAfter > 0 {
		exit = time.After(*exitAfter)
	}
	for {
		select {
		case <-tick:
			fmt.Fprintf(stdout, "%s leads (term %s)\n", id, term)
			continue
		case <-sigs:
		case <-exit:
		case <-ctx.Done():
		}
		break
	}
	if *stopDelay > 0 {
		time.Sleep(*stopDelay) // the job finishing its work, not a synchronization
	}
	fmt.Fprintf(ev, "stop %s %s %d %d\n", id, term, MonoNow(), pid)
	return 0
}

// Event is one line a worker wrote.
type Event struct {
	Kind    string // "start" or "stop"
	ID      string
	Term    uint64
	Mono    int64 // CLOCK_MONOTONIC ns
	PID     int
	Overlap bool // start only: another worker was alive
}

// Parse parses one worker line.
func Parse(line string) (Event, error) {
	var e Event
	var term, state string
	n, _ := fmt.Sscanf(line, "%s %s %s %d %d %s", &e.Kind, &e.ID, &term, &e.Mono, &e.PID, &state)
	if n < 5 || (e.Kind != "start" && e.Kind != "stop") {
		return e, fmt.Errorf("bad worker event %q", line)
	}
	t, err := strconv.ParseUint(term, 10, 64)
	if err != nil {
		return e, fmt.Errorf("bad term in worker event %q", line)
	}
	e.Term, e.Overlap = t, state == "overlap"
	return e, nil
}

// History is what a run of workers did, checked for safety.
type History struct {
	Starts, Stops int
	Overlaps      int  // starts that found another worker alive, plus overlapping intervals
	TermsGrow     bool // every start's term is greater than the one before
	FirstTerm     uint64
	LastTerm      uint64
}

// Check checks events, in the order they were written, for two workers
// alive at once and for terms that did not grow, with the checker every
// tenure harness shares (package internal/history). A worker's interval
// runs from its start to its stop; one killed without a stop line is
// covered by the lock check alone (its interval is taken to end where it
// began).
func Check(evs []Event) History {
	h := History{TermsGrow: true}
	open := map[int]int{} // PID → index in ivs
	var ivs []history.Interval
	for _, e := range evs {
		switch e.Kind {
		case "start":
			h.Starts++
			if e.Overlap {
				h.Overlaps++
			}
			if h.Starts == 1 {
				h.FirstTerm = e.Term
			}
			h.LastTerm = e.Term
			open[e.PID] = len(ivs)
			ivs = append(ivs, history.Interval{ID: e.ID, Term: e.Term, Start: time.Duration(e.Mono), End: time.Duration(e.Mono)})
		case "stop":
			h.Stops++
			if i, ok := open[e.PID]; ok {
				ivs[i].End = time.Duration(e.Mono)
				delete(open, e.PID)
			}
		}
	}
	for _, v := range history.Check(ivs, 0, nil) {
		switch v.Rule {
		case history.RuleOverlap:
			h.Overlaps++
		case history.RuleTerms:
			h.TermsGrow = false
		}
	}
	return h
}
