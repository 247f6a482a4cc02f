package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxwait"
)

const demoHelp = `Usage: tenure demo [flags]

Starts a few "tenure run" candidates for one key on a local store in a temp
directory, each running a small worker while it leads. Then it kills the
leader three times (SIGTERM, SIGKILL, SIGSTOP), measures each failover (kill
to the next leader's worker starting), and checks that no two workers ever
ran at once and that terms only grew. Ends by itself; exit code 0 if every
check passed.

Flags:
`

// demoScenario is one way the demo kills the leader.
type demoScenario struct {
	name string
	sig  syscall.Signal
}

var demoScenarios = []demoScenario{
	{"graceful (SIGTERM)", syscall.SIGTERM},
	{"crash (SIGKILL)", syscall.SIGKILL},
	{"freeze (SIGSTOP)", syscall.SIGSTOP},
}

// demoResult is the outcome of one scenario.
type demoResult struct {
	scenario     demoScenario
	victim, next string
	failover     time.Duration // kill → the next leader's worker started
	elected      time.Duration // kill → the observer saw the new term; -1 if it did not
}

// termLog records when the demo's observer first saw each term held.
type termLog struct {
	mu      sync.Mutex
	at      map[uint64]int64 // term → CLOCK_MONOTONIC ns
	changed chan struct{}
}

func (l *termLog) add(term uint64, mono int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.at[term]; !ok {
		l.at[term] = mono
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// wait returns when term was first seen, waiting up to d for it.
func (l *termLog) wait(term uint64, d time.Duration) (int64, bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		l.mu.Lock()
		at, ok := l.at[term]
		changed := l.changed
		l.mu.Unlock()
		if ok {
			return at, true
		}
		select {
		case <-changed:
		case <-t.C:
			return 0, false
		}
	}
}

// demoCmd is `tenure demo`.
func demoCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo")
	n := fs.Int("candidates", 4, "number of candidates (2-9)")
	ttl := fs.Duration("ttl", time.Second, "lease TTL of the candidates")
	lead := fs.Duration("lead", 1200*time.Millisecond, "how long to let each leader work before killing it")
	if code, done := parseFlags(fs, args, demoHelp, stdout, stderr); done {
		return code
	}
	if err := noArgs(fs); err != nil {
		return fail(stderr, err)
	}
	if *n < 2 || *n > 9 {
		return fail(stderr, usageErrorf("--candidates %d: want 2 to 9", *n))
	}
	if err := checkTTL(*ttl, nil); err != nil {
		return fail(stderr, err)
	}
	self, err := os.Executable()
	if err != nil {
		return fail(stderr, fmt.Errorf("cannot find the tenure executable: %w", err))
	}
	dir, err := os.MkdirTemp("", "tenure-demo-")
	if err != nil {
		return fail(stderr, err)
	}
	defer os.RemoveAll(dir)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	d := &demo{out: stdout, color: isTerminal(stdout), start: time.Now()}
	c, err := newCluster(self, dir, "demo",
		[]string{"--ttl", ttl.String(), "--restart", "--quiet"},
		[]string{"--print", "--heartbeat", "400ms"})
	if err != nil {
		return fail(stderr, err)
	}
	c.stdout, c.stderr = &prefixWriter{d: d}, stderr
	defer c.close()
	return d.run(ctx, c, *n, *ttl, *lead, stderr)
}

// demo prints the demo's timeline.
type demo struct {
	out   io.Writer
	color bool
	start time.Time
}

func (d *demo) paint(code, s string) string {
	if !d.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// say prints one timeline line: seconds since the start, then msg.
func (d *demo) say(msg string) {
	fmt.Fprintf(d.out, "%s  %s\n", d.paint("2", fmt.Sprintf("%6.2fs", time.Since(d.start).Seconds())), msg)
}

// prefixWriter shows workers' heartbeats, dimmed and indented.
type prefixWriter struct{ d *demo }

func (w *prefixWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.d.say(w.d.paint("2", "  │ "+line))
	}
	return len(p), nil
}

func (d *demo) run(ctx context.Context, c *cluster, n int, ttl, lead time.Duration, stderr io.Writer) int {
	d.say(fmt.Sprintf("%d candidates for key %q, local store in %s, ttl %s",
		n, c.key, strings.TrimPrefix(c.storeURL, "file://"), ttl))
	for i := 1; i <= n; i++ {
		if _, err := c.start(fmt.Sprintf("node-%d", i)); err != nil {
			return fail(stderr, err)
		}
	}
	seen, stopObs, err := d.observe(ctx, c, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	defer stopObs()

	s := &demoState{d: d, c: c, seen: seen, wait: 5*ttl + 5*time.Second}
	first, next, ok := c.events.nextStart(0, s.wait)
	if !ok || ctx.Err() != nil {
		return fail(stderr, fmt.Errorf("no leader within %s", s.wait))
	}
	s.leader, s.next = first, next
	for i, sc := range demoScenarios {
		if !ctxwait.Sleep(ctx, lead) {
			return fail(stderr, ctx.Err())
		}
		d.say(d.paint("1;31", fmt.Sprintf("[%d/%d] %s of the leader, %s", i+1, len(demoScenarios), sc.name, s.leader.ID)))
		if err := s.failover(sc); err != nil {
			return fail(stderr, err)
		}
	}
	if s.frozen != nil {
		if !ctxwait.Sleep(ctx, lead/2) {
			return fail(stderr, ctx.Err())
		}
		_ = s.frozen.Cmd.Process.Signal(syscall.SIGCONT)
		d.say(fmt.Sprintf("SIGCONT %s: it finds its lease gone and rejoins as a candidate", s.frozen.ID))
		if !ctxwait.Sleep(ctx, lead/2) {
			return fail(stderr, ctx.Err())
		}
	}
	stopObs()
	c.stopAll(5 * time.Second)
	return d.summary(s.results, checkHistory(c.events.events()))
}

// observe follows the key in the store, printing each change and
// recording when each term was first seen held, until stop is called
// (more than once is fine).
func (d *demo) observe(ctx context.Context, c *cluster, stderr io.Writer) (seen *termLog, stop func(), err error) {
	store, err := tenure.Open(ctx, c.storeURL)
	if err != nil {
		return nil, nil, err
	}
	obsCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	seen = &termLog{at: map[uint64]int64{}, changed: make(chan struct{})}
	go func() {
		defer close(done)
		obs := &tenure.Observer{Store: store, Key: c.key, Logger: quietLogger(stderr)}
		for r := range obs.Changes(obsCtx) {
			if !r.Held() {
				d.say(d.paint("33", "store: no leader"))
				continue
			}
			seen.add(r.Term, monoNow())
			d.say(d.paint("1;32", fmt.Sprintf("store: %s leads, term %d", r.Holder, r.Term)))
		}
	}()
	var once sync.Once
	return seen, func() {
		once.Do(func() {
			cancel()
			<-done
			store.Close()
		})
	}, nil
}

// demoState is the demo's progress through its scenarios.
type demoState struct {
	d       *demo
	c       *cluster
	seen    *termLog
	wait    time.Duration
	leader  workerEvent // the current leader's worker start
	next    int         // the event index after it
	results []demoResult
	frozen  *candidate // the candidate stopped with SIGSTOP, if any
}

// failover kills the leader as sc says, measures the failover and keeps
// the group full.
func (s *demoState) failover(sc demoScenario) error {
	d, c := s.d, s.c
	victim, victimWorker := c.get(s.leader.ID), s.leader
	t0 := monoNow()
	if err := c.signal(s.leader.ID, sc.sig); err != nil {
		return err
	}
	ev, idx, ok := c.events.nextStart(s.next+1, s.wait)
	if !ok {
		return fmt.Errorf("no new leader within %s of the %s", s.wait, sc.name)
	}
	res := demoResult{scenario: sc, victim: s.leader.ID, next: ev.ID, failover: time.Duration(ev.Mono - t0), elected: -1}
	if at, ok := s.seen.wait(ev.Term, time.Second); ok {
		res.elected = time.Duration(at - t0)
	}
	s.results = append(s.results, res)
	d.say(d.paint("1", fmt.Sprintf("failover to %s: its worker runs %s after the %s (elected after %s)",
		ev.ID, fmtDur(res.failover), sc.name[strings.IndexByte(sc.name, '(')+1:len(sc.name)-1], fmtDurOrDash(res.elected))))
	s.leader, s.next = ev, idx

	if sc.sig == syscall.SIGSTOP {
		s.frozen = victim
		if stop, _, ok := c.events.waitFor(0, 0, func(e workerEvent) bool { return e.Kind == "stop" && e.PID == victimWorker.PID }); ok && stop.Mono < ev.Mono {
			d.say(fmt.Sprintf("%s's worker had been stopped by its supervisor %s after the freeze, %s before %s started",
				victim.ID, fmtDur(time.Duration(stop.Mono-t0)), fmtDur(time.Duration(ev.Mono-stop.Mono)), ev.ID))
		}
		return nil
	}
	// Keep the group full: the killed candidate rejoins.
	select {
	case <-victim.Done:
	case <-time.After(s.wait):
		return fmt.Errorf("%s did not exit after %s", victim.ID, sc.name)
	}
	if _, err := c.start(victim.ID); err != nil {
		return err
	}
	d.say(fmt.Sprintf("%s restarted as a candidate", victim.ID))
	return nil
}

// summary prints the table and the checks; exit 0 if all passed.
func (d *demo) summary(results []demoResult, h history) int {
	fmt.Fprintln(d.out)
	fmt.Fprintf(d.out, "  %-20s %-8s %-8s %10s %12s\n", "kill", "leader", "next", "elected", "worker runs")
	for _, r := range results {
		fmt.Fprintf(d.out, "  %-20s %-8s %-8s %10s %12s\n", r.scenario.name, r.victim, r.next, fmtDurOrDash(r.elected), fmtDur(r.failover))
	}
	fmt.Fprintln(d.out)
	okMark, badMark := d.paint("32", "ok"), d.paint("1;31", "FAILED")
	mark := func(ok bool) string {
		if ok {
			return okMark
		}
		return badMark
	}
	fmt.Fprintf(d.out, "  overlap  %d leaders at once, over %d terms            %s\n", h.Overlaps, h.Starts, mark(h.Overlaps == 0))
	fmt.Fprintf(d.out, "  terms    %d → %d, strictly increasing                 %s\n", h.FirstTerm, h.LastTerm, mark(h.TermsGrow))
	fmt.Fprintln(d.out, "  (SIGSTOP fails over after the TTL: a frozen leader cannot say it is gone;")
	fmt.Fprintln(d.out, "   its supervisor killed its worker before the lease could lapse.)")
	if h.Overlaps != 0 || !h.TermsGrow {
		return exitRuntime
	}
	return exitOK
}

// fmtDur prints a duration with a sensible precision.
func fmtDur(d time.Duration) string {
	switch {
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func fmtDurOrDash(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmtDur(d)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
