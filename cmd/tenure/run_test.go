package main

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wait is how long a test waits for something that should happen quickly:
// long enough for a loaded CI machine, short enough to fail a hang.
const wait = 20 * time.Second

func TestRunPassesEnvAndExitCode(t *testing.T) {
	store := "file://" + t.TempDir()
	script := `echo "key=$TENURE_KEY id=$TENURE_ID term=$TENURE_TERM"; exit 7`
	for term := 1; term <= 2; term++ {
		r := runTenure(t, "run", "--store", store, "--key", "job", "--id", "cand-a", "--quiet", "--", "sh", "-c", script)
		if r.code != 7 {
			t.Fatalf("exit code %d, want CMD's 7; stderr: %s", r.code, r.stderr)
		}
		want := "key=job id=cand-a term=" + string(rune('0'+term))
		if strings.TrimSpace(r.stdout) != want {
			t.Fatalf("CMD printed %q, want %q", r.stdout, want)
		}
	}
	// A CMD killed by a signal: 128+9.
	r := runTenure(t, "run", "--store", store, "--key", "job", "--quiet", "--", "sh", "-c", "kill -KILL $$")
	if r.code != 137 {
		t.Fatalf("exit code %d for a CMD killed by SIGKILL, want 137; stderr: %s", r.code, r.stderr)
	}
	// The lease was released each time: the key is free.
	if s := runTenure(t, "status", "--store", store, "--key", "job"); s.code != exitFree || !strings.Contains(s.stdout, "last term 3") {
		t.Fatalf("status after the runs: code %d, %q; want free after term 3", s.code, s.stdout)
	}
}

func TestRunLogs(t *testing.T) {
	store := "file://" + t.TempDir()
	r := runTenure(t, "run", "--store", store, "--key", "job", "--id", "cand-a", "--", "true")
	if r.code != 0 {
		t.Fatalf("exit code %d; stderr: %s", r.code, r.stderr)
	}
	for _, want := range []string{"tenure: elected", "term=1", "tenure: command started", "tenure: command exited", "code=0"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, r.stderr)
		}
	}
	if q := runTenure(t, "run", "--store", store, "--key", "job", "--quiet", "--", "true"); q.stderr != "" {
		t.Errorf("--quiet still logged:\n%s", q.stderr)
	}
}

// TestRunSecondCandidateWaits: a second `tenure run` on the same key starts
// its CMD only after the first CMD exited, never overlapping.
func TestRunSecondCandidateWaits(t *testing.T) {
	c := testCluster(t, "job", []string{"--quiet"}, []string{"--exit-after", "400ms"})
	a, _, i := startLeader(t, c, "a")
	b, err := c.start("b")
	if err != nil {
		t.Fatal(err)
	}
	second, _, ok := c.events.nextStart(i+1, wait)
	if !ok || second.ID != "b" {
		t.Fatalf("b's CMD did not start after a's: %+v", second)
	}
	waitDone(t, a.Done, wait, "candidate a")
	waitDone(t, b.Done, wait, "candidate b")
	for _, p := range []*candidate{a, b} {
		if code := exitCode(p.Cmd.ProcessState); code != 0 {
			t.Errorf("candidate %s exited %d, want its CMD's 0", p.ID, code)
		}
	}
	evs := c.events.events()
	h := checkHistory(evs)
	if h.Starts != 2 || h.Stops != 2 || h.Overlaps != 0 || !h.TermsGrow {
		t.Fatalf("history %+v from %+v: want 2 non-overlapping terms, growing", h, evs)
	}
	if evs[1].Kind != "stop" || evs[1].ID != "a" || evs[2].ID != "b" {
		t.Fatalf("events %+v: want a start, a stop, b start, b stop", evs)
	}
}

// TestRunCrashOfLeader: SIGKILL of the leading tenure kills its CMD (the
// supervisor sees the control pipe close) and the other candidate takes
// over, without waiting for the lease's TTL.
func TestRunCrashOfLeader(t *testing.T) {
	const ttl = 10 * time.Second
	c := testCluster(t, "job", []string{"--quiet", "--ttl", ttl.String()}, nil)
	_, first, i := startLeader(t, c, "a")
	if _, err := c.start("b"); err != nil {
		t.Fatal(err)
	}
	t0 := monoNow()
	if err := c.signal("a", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	second, _, ok := c.events.nextStart(i+1, wait)
	if !ok || second.ID != "b" {
		t.Fatalf("b did not take over: %+v", second)
	}
	if alive(first.PID) {
		t.Fatalf("a's CMD (pid %d) still runs after its tenure was killed", first.PID)
	}
	if h := checkHistory(c.events.events()); h.Overlaps != 0 || !h.TermsGrow {
		t.Fatalf("history %+v: overlap or terms not growing", h)
	}
	// The lease ended with a's processes, not by expiry: b won before a's
	// lease could have lapsed.
	if took := time.Duration(second.Mono - t0); took >= ttl {
		t.Fatalf("b took over %s after the crash: that is the TTL, the holder's death went unnoticed", took)
	}
}

// TestRunStoppedLeader: SIGSTOP of the leading tenure cannot keep its CMD
// running: the supervisor stops it by the renew deadline, and the other
// candidate takes over once the lease expired. When the frozen tenure
// resumes, it finds leadership lost and exits 1.
func TestRunStoppedLeader(t *testing.T) {
	c := testCluster(t, "job", []string{"--quiet", "--ttl", "1500ms"}, nil)
	a, first, i := startLeader(t, c, "a")
	if _, err := c.start("b"); err != nil {
		t.Fatal(err)
	}
	if err := c.signal("a", syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stop, _, ok := c.events.waitFor(i+1, wait, func(e workerEvent) bool { return e.Kind == "stop" && e.PID == first.PID })
	if !ok {
		t.Fatal("the frozen leader's CMD was not stopped by its supervisor")
	}
	second, _, ok := c.events.nextStart(i+1, wait)
	if !ok || second.ID != "b" {
		t.Fatalf("b did not take over: %+v", second)
	}
	if second.Mono <= stop.Mono {
		t.Fatalf("b's CMD started (%d) before a's stopped (%d)", second.Mono, stop.Mono)
	}
	if h := checkHistory(c.events.events()); h.Overlaps != 0 || !h.TermsGrow {
		t.Fatalf("history %+v: overlap or terms not growing", h)
	}
	if err := c.signal("a", syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a.Done, wait, "the resumed candidate a")
	if code := exitCode(a.Cmd.ProcessState); code != exitRuntime {
		t.Fatalf("resumed candidate exited %d, want %d (leadership lost)", code, exitRuntime)
	}
}

// TestRunForwardsSignals: SIGTERM to a leading tenure reaches CMD, and
// tenure exits with CMD's code; SIGINT to a waiting candidate ends it
// without running CMD.
func TestRunForwardsSignals(t *testing.T) {
	c := testCluster(t, "job", []string{"--quiet"}, nil)
	a, first, i := startLeader(t, c, "a")
	var errB bytes.Buffer
	c.stderr = &errB
	b, err := c.start("b")
	if err != nil {
		t.Fatal(err)
	}
	// b is campaigning; interrupt it.
	if err := c.signal("b", syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitDone(t, b.Done, wait, "the interrupted candidate")
	if code := exitCode(b.Cmd.ProcessState); code != 128+int(syscall.SIGINT) {
		t.Fatalf("interrupted candidate exited %d, want 130; stderr %s", code, errB.String())
	}
	if err := c.signal("a", syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.events.waitFor(i+1, wait, func(e workerEvent) bool { return e.Kind == "stop" && e.PID == first.PID }); !ok {
		t.Fatal("CMD did not get the forwarded SIGTERM")
	}
	waitDone(t, a.Done, wait, "the leader")
	if code := exitCode(a.Cmd.ProcessState); code != 0 {
		t.Fatalf("leader exited %d, want its CMD's 0", code)
	}
	if n := checkHistory(c.events.events()).Starts; n != 1 {
		t.Fatalf("%d CMDs started, want only a's", n)
	}
}

// TestRunRestart: with --restart, tenure campaigns again after CMD exits
// and runs it again in a new term; a signal ends it.
func TestRunRestart(t *testing.T) {
	c := testCluster(t, "job", []string{"--quiet", "--ttl", "1s", "--restart"}, []string{"--exit-after", "50ms"})
	a, err := c.start("a")
	if err != nil {
		t.Fatal(err)
	}
	next := 0
	for run := 1; run <= 3; run++ {
		ev, i, ok := c.events.nextStart(next, wait)
		if !ok || ev.ID != "a" {
			t.Fatalf("run %d of CMD did not start", run)
		}
		next = i + 1
	}
	if err := c.signal("a", syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitDone(t, a.Done, wait, "tenure run --restart")
	// Stopped while CMD ran (CMD exits 0 on SIGTERM) or between runs.
	if code := exitCode(a.Cmd.ProcessState); code != 0 && code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit code %d, want 0 or 143", code)
	}
	if h := checkHistory(c.events.events()); h.Overlaps != 0 || !h.TermsGrow || h.Starts < 3 {
		t.Fatalf("history %+v: want at least 3 growing, non-overlapping terms", h)
	}
}

// TestRunCommandOutlivesManyDeadlines: CMD runs for several TTLs and is
// never stopped, because every renewal moves the supervisor's deadlines
// with the elector's own (its Term). A supervisor that missed renewals
// would SIGTERM CMD at the first renew deadline, 400 ms in.
func TestRunCommandOutlivesManyDeadlines(t *testing.T) {
	store := "file://" + t.TempDir()
	// A TTL of 3 s leaves every renewal a second of slack, so that a busy
	// machine delaying one does not stop CMD at its renew deadline (which
	// is what the supervisor must do, and what a shorter TTL made this
	// test see under load).
	r := runTenure(t, "run", "--store", store, "--key", "long", "--ttl", "3s", "--quiet", "--",
		"sh", "-c", "sleep 7; echo finished")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "finished" {
		t.Fatalf("exit code %d, stdout %q; want 0 and \"finished\" (CMD ran past 3 renew deadlines); stderr: %s", r.code, r.stdout, r.stderr)
	}
}

// startLeader starts candidate id of c, alone on its key, and waits for its
// CMD to start; it returns the candidate, the start event and its index.
func startLeader(t *testing.T, c *cluster, id string) (*candidate, workerEvent, int) {
	t.Helper()
	p, err := c.start(id)
	if err != nil {
		t.Fatal(err)
	}
	ev, i, ok := c.events.nextStart(0, wait)
	if !ok || ev.ID != id {
		t.Fatalf("%s's CMD did not start: %+v", id, ev)
	}
	return p, ev, i
}
