package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/internal/testserver"
)

// requireNoOverlap fails t if two workers ever ran at once or terms did
// not grow, by the checker every harness shares.
func requireNoOverlap(t *testing.T, c *cluster) {
	t.Helper()
	evs := c.events.events()
	if h := checkHistory(evs); h.Overlaps != 0 || !h.TermsGrow {
		for _, e := range evs {
			t.Logf("%+v", e)
		}
		t.Fatalf("%d overlapping leaders, terms growing: %v", h.Overlaps, h.TermsGrow)
	}
}

// otherThan returns the first of ids that is not id.
func otherThan(id string, ids ...string) string {
	for _, x := range ids {
		if x != id {
			return x
		}
	}
	return ""
}

// TestStepDownHandsOverToTheNamedCandidate: real `tenure run` candidates
// (without --restart: a leader that steps down must stay a candidate, not
// exit); each `tenure step-down --to ID` makes ID's CMD the next to start,
// after the old one stopped.
func TestStepDownHandsOverToTheNamedCandidate(t *testing.T) {
	c := testCluster(t, "job", []string{"--ttl", "5s", "--quiet"}, nil)
	ids := []string{"a", "b", "c"}
	leader, i := startCandidates(t, c, ids...)
	if r := runTenure(t, "step-down", "--store", c.storeURL, "--key", "job", "--to", leader.ID); r.code != exitOK || !strings.Contains(r.stdout, "already leads") {
		t.Fatalf("step-down --to the leader: exit %d, stdout %q; want 0, already leads", r.code, r.stdout)
	}
	for round := range 4 {
		to := otherThan(leader.ID, ids[(round+1)%3], ids[(round+2)%3])
		r := runTenure(t, "step-down", "--store", c.storeURL, "--key", "job", "--to", to)
		if r.code != exitOK || !strings.Contains(r.stdout, to+" leads") {
			t.Fatalf("step-down --to %s: exit %d, stdout %q, stderr %q", to, r.code, r.stdout, r.stderr)
		}
		next, j, ok := c.events.nextStart(i+1, wait)
		if !ok || next.ID != to {
			t.Fatalf("round %d: next start %+v (found %v); want %s", round, next, ok, to)
		}
		select {
		case <-c.get(leader.ID).Done:
			t.Fatalf("%s exited after stepping down; it must stay a candidate", leader.ID)
		default:
		}
		leader, i = next, j
	}
	c.stopAll(10 * time.Second)
	requireNoOverlap(t, c)
}

// TestStepDownToAnAbsentCandidateFallsBack: nobody takes the key during the
// window, and a candidate does once it passed.
func TestStepDownToAnAbsentCandidateFallsBack(t *testing.T) {
	c := testCluster(t, "job", []string{"--ttl", "2s", "--quiet"}, nil)
	_, i := startCandidates(t, c, "a", "b")
	const window = 2 * time.Second
	t0 := monoNow()
	r := runTenure(t, "step-down", "--store", c.storeURL, "--key", "job", "--to", "ghost", "--window", window.String())
	if r.code != exitOK || !strings.Contains(r.stdout, "ghost did not take over") || !strings.Contains(r.stderr, "ghost is not registered") {
		t.Fatalf("step-down --to ghost: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	next, _, ok := c.events.nextStart(i+1, wait)
	if !ok {
		t.Fatal("nobody took over after the window")
	}
	if d := time.Duration(next.Mono - t0); d < window || d > window+2*time.Second {
		t.Fatalf("%s took over %s after the request; want after the %s window, within a TTL of it", next.ID, d, window)
	}
	c.stopAll(10 * time.Second)
	requireNoOverlap(t, c)
}

// TestPriorityZeroNeverLeads: a lone --priority 0 candidate never takes the
// key; status reports it free and lists the candidate.
func TestPriorityZeroNeverLeads(t *testing.T) {
	c := testCluster(t, "job", []string{"--ttl", "1s", "--quiet", "--priority", "0"}, nil)
	if _, err := c.start("standby"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if n := c.events.length(); n != 0 {
		t.Fatalf("a priority-0 candidate ran its command (%d events)", n)
	}
	r := runTenure(t, "status", "--store", c.storeURL, "--key", "job", "--candidates")
	if r.code != exitFree || !strings.Contains(r.stdout, "no leader (never granted)") || !strings.Contains(r.stdout, "standby priority 0") {
		t.Fatalf("status: exit %d, stdout %q; want free (3), never granted, the standby listed", r.code, r.stdout)
	}
	r = runTenure(t, "step-down", "--store", c.storeURL, "--key", "job", "--to", "standby")
	if r.code != exitRuntime || !strings.Contains(r.stderr, "priority 0 and never leads") {
		t.Fatalf("step-down --to the standby: exit %d, stderr %q; want 1, never leads", r.code, r.stderr)
	}
	select {
	case <-c.get("standby").Done:
		t.Fatal("the priority-0 candidate exited")
	default:
	}
}

// TestHandoverOnSigterm: with --handover, SIGTERM of the leading tenure
// hands the key to the highest-priority waiting candidate, and says so.
func TestHandoverOnSigterm(t *testing.T) {
	c := testCluster(t, "job", []string{"--ttl", "2s", "--handover"}, nil)
	logs := new(syncbuf.Buffer)
	c.stderr = logs
	if _, err := c.start("a"); err != nil {
		t.Fatal(err)
	}
	_, i, ok := c.events.nextStart(0, wait)
	if !ok {
		t.Fatal("no leader")
	}
	c.runArgs = append(c.runArgs, "--priority", "1")
	if _, err := c.start("low"); err != nil {
		t.Fatal(err)
	}
	c.runArgs = append(c.runArgs[:len(c.runArgs)-1], "7")
	if _, err := c.start("high"); err != nil {
		t.Fatal(err)
	}
	waitCandidates(t, c, 3)
	if err := c.signal("a", syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next, _, ok := c.events.nextStart(i+1, wait)
	if !ok || next.ID != "high" {
		t.Fatalf("after SIGTERM of the leader: next start %+v (found %v); want high; logs:\n%s", next, ok, logs.String())
	}
	waitDone(t, c.get("a").Done, wait, "the old leader")
	if code := exitCode(c.get("a").Cmd.ProcessState); code != 0 {
		t.Errorf("the old leader exited %d; want its CMD's 0, as without --handover", code)
	}
	c.stopAll(10 * time.Second)
	requireNoOverlap(t, c)
	for _, want := range []string{
		`msg="tenure: handing over" key=job id=a term=1 to=high priority=7`,
		// It waited for high before exiting: on the local store its
		// request ends with its process, and low could then take the key.
		`msg="tenure: handed over" key=job id=a to=high term=2`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the old leader did not log %s:\n%s", want, logs.String())
		}
	}
}

// waitCandidates waits until n candidates are registered.
func waitCandidates(t *testing.T, c *cluster, n int) {
	t.Helper()
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		r := runTenure(t, "status", "--store", c.storeURL, "--key", "job", "--candidates")
		if strings.Contains(r.stdout, "candidates ("+string(rune('0'+n))+",") {
			return
		}
	}
	t.Fatalf("%d candidates not registered within %s", n, wait)
}

func TestStepDownBadInput(t *testing.T) {
	store := "file://" + t.TempDir()
	peer := "peer://?id=1&peers=1=127.0.0.1:1&algorithm=ring&secret-file=/nonexistent"
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"step-down", "--store", store, "--key", "job"}, exitFree, `nobody leads "job"`},
		{[]string{"step-down", "--store", store}, exitUsage, "--key is required"},
		{[]string{"step-down", "--store", store, "--key", "job", "--no-wait"}, exitUsage, "--no-wait is not supported on the local store"},
		{[]string{"step-down", "--store", store, "--key", "job", "--window", "1ms"}, exitUsage, "--window 1ms is out of range"},
		{[]string{"step-down", "--store", store, "--key", strings.Repeat("k", 240)}, exitUsage, "step-down needs at most 236"},
		{[]string{"step-down", "--store", store, "--key", "job", "--to", "a\x01"}, exitUsage, "control character"},
		{[]string{"step-down", "--store", peer, "--key", "job"}, exitUsage, "leave id (and state-dir) out of the peer URL"},
		{[]string{"step-down", "--store", strings.Replace(peer, "ring", "nosuch", 1), "--key", "job"}, exitUsage, "step-down is not supported in peer mode (algorithm nosuch)"},
		{[]string{"run", "--store", peer + "&priority=3", "--key", "job", "--priority", "2", "--", "true"}, exitUsage, "--priority 2 and the peer URL's priority=3 disagree"},
		{[]string{"run", "--store", peer + "&priority=-1", "--key", "job", "--", "true"}, exitUsage, `the peer URL's priority="-1" is not an integer from 0 (never lead) to 1000`},
		{[]string{"run", "--store", peer + "&priority=0", "--key", "job", "--wait", "1s", "--", "true"}, exitUsage, "priority 0 never campaigns"},
		{[]string{"run", "--store", peer, "--key", "job", "--priority", "-1", "--", "true"}, exitUsage, "--priority -1 is out of range"},
		{[]string{"run", "--store", store, "--key", "job", "--priority", "-1", "--", "true"}, exitUsage, "--priority -1 is out of range"},
		{[]string{"run", "--store", store, "--key", "job", "--priority", "0", "--try", "--", "true"}, exitUsage, "--priority 0 never campaigns"},
		{[]string{"prefer", "--store", store, "--key", "job"}, exitUsage, "tenure: prefer takes one argument, the preferred candidate's ID (got 0)"},
		{[]string{"prefer", "--store", store, "--key", "job", "b", "--delay", "-1s"}, exitUsage, "tenure: prefer takes one argument"},
		{[]string{"prefer", "--store", store, "--key", "job", "--delay", "-1s", "b"}, exitUsage, "--delay -1s is out of range"},
		{[]string{"prefer", "--store", store, "--key", "job", "--ttl", "1ms", "b"}, exitUsage, "--ttl 1ms is out of range"},
		{[]string{"prefer", "--store", store, "--key", "job", "a\x01"}, exitUsage, "ID: "},
		{[]string{"prefer", "--store", store, "--key", "job", "--log-format", "xml", "b"}, exitUsage, `--log-format "xml": want text or json`},
		{[]string{"prefer", "--store", store, "--key", strings.Repeat("k", 240), "b"}, exitUsage, "a preference needs at most 236"},
		{[]string{"prefer", "--store", strings.Replace(peer, "id=1&", "", 1), "--key", "job", "b"}, exitUsage, "prefer is not supported in peer modes"},
	} {
		var stdout, stderr bytes.Buffer
		code := runInProcess(tc.args, &stdout, &stderr)
		line := stderr.String()
		if code != tc.code || !strings.Contains(line, tc.want) || strings.Count(line, "\n") != 1 || !strings.HasPrefix(line, "tenure: ") {
			t.Errorf("tenure %s: exit %d, stderr %q; want exit %d and one line saying %q", strings.Join(tc.args, " "), code, line, tc.code, tc.want)
		}
	}
}

// TestYieldAfter: a leader with --yield-after hands over to a candidate of
// higher priority once it has been registered that long, not before.
func TestYieldAfter(t *testing.T) {
	c := testCluster(t, "job", []string{"--ttl", "1s", "--quiet"}, nil)
	base := c.runArgs
	c.runArgs = slices.Concat(base, []string{"--yield-after", "2s"})
	_, _, i := startLeader(t, c, "low")
	c.runArgs = slices.Concat(base, []string{"--priority", "5"})
	joined := monoNow()
	if _, err := c.start("high"); err != nil {
		t.Fatal(err)
	}
	next, _, ok := c.events.nextStart(i+1, wait)
	if d := time.Duration(next.Mono - joined); !ok || next.ID != "high" || d < 2*time.Second || d > 6*time.Second {
		t.Fatalf("next start %+v (found %v) %s after high joined; want high after 2s, within a few TTLs", next, ok, d)
	}
	c.stopAll(10 * time.Second)
	requireNoOverlap(t, c)
}

// TestStepDownOfAnUncontrolledLeader: a holder that ignores step-down
// requests keeps the key; step-down gives up after the window and a TTL,
// exit 1, saying why it may be.
func TestStepDownOfAnUncontrolledLeader(t *testing.T) {
	url := "file://" + t.TempDir()
	store, err := tenure.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Acquire(context.Background(), "job", "plain", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := runInProcess([]string{"step-down", "--store", url, "--key", "job", "--window", "300ms"}, &stdout, &stderr)
	if code != exitRuntime || !strings.Contains(stderr.String(), `does plain run with leadership control`) {
		t.Fatalf("exit %d, stderr %q; want 1 and a hint", code, stderr.String())
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Fatalf("gave up after %s, before the window", time.Since(start))
	}
}

// TestRollingRestartWithHandover: restarting every node in turn (SIGTERM,
// then start again), as a rolling deploy does, moves leadership at most
// twice with --handover: each hand-over goes to the most recently
// registered candidate, a node already restarted once one exists.
func TestRollingRestartWithHandover(t *testing.T) {
	c := testCluster(t, "job", []string{"--ttl", "2s", "--quiet", "--handover"}, nil)
	ids := []string{"a", "b", "c"}
	_, _, i := startLeader(t, c, ids[0])
	waitCandidates(t, c, 1)
	for n, id := range ids[1:] {
		if _, err := c.start(id); err != nil {
			t.Fatal(err)
		}
		waitCandidates(t, c, n+2) // registered in order: since differs
	}
	for _, id := range ids {
		if err := c.signal(id, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitDone(t, c.get(id).Done, wait, id)
		if _, err := c.start(id); err != nil {
			t.Fatal(err)
		}
		waitCandidates(t, c, 3)
	}
	time.Sleep(time.Second)
	c.stopAll(10 * time.Second)
	moves := 0
	for _, e := range c.events.events()[i+1:] {
		if e.Kind == "start" {
			moves++
		}
	}
	if moves < 1 || moves > 2 {
		t.Fatalf("leadership moved %d times in a rolling restart of 3 nodes; want 1 or 2", moves)
	}
	requireNoOverlap(t, c)
}

// TestPrefer: tenure prefer moves leadership to the named candidate once
// the leader has seen it registered for --delay, and keeps it there while
// it runs; stopping it clears the preference, and leadership stays put.
func TestPrefer(t *testing.T) {
	c := testCluster(t, "job", []string{"--ttl", "1s", "--quiet"}, nil)
	_, _, i := startLeader(t, c, "a")
	if _, err := c.start("b"); err != nil {
		t.Fatal(err)
	}
	set := monoNow()
	cmd := exec.Command(tenureBin, "prefer", "--store", c.storeURL, "--key", "job", "--delay", "2s", "--ttl", "1s", "b")
	out := startPiped(t, cmd, syscall.SIGTERM)
	next, j, ok := c.events.nextStart(i+1, wait)
	if d := time.Duration(next.Mono - set); !ok || next.ID != "b" || d < 2*time.Second || d > 6*time.Second {
		t.Fatalf("next start %+v (found %v) %s after the preference was set; want b after 2s, within a few TTLs", next, ok, d)
	}
	if r := runTenure(t, "status", "--store", c.storeURL, "--key", "job", "--candidates"); !strings.Contains(r.stdout, "b priority 1") ||
		!strings.Contains(r.stdout, ", leading, preferred") {
		t.Fatalf("status --candidates while b is preferred: %q; want b marked leading, preferred", r.stdout)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	said, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil || !strings.Contains(string(said), "job: preferring b") || !strings.Contains(string(said), "preference for b cleared") {
		t.Fatalf("tenure prefer on SIGTERM: %v, said %q; want exit 0, set then cleared", err, said)
	}
	if later, _, moved := c.events.nextStart(j+1, 3*time.Second); moved {
		t.Fatalf("%s took over after the preference was cleared; b should lead on", later.ID)
	}
	c.stopAll(10 * time.Second)
	requireNoOverlap(t, c)
}

// TestPreferWaitsAndSaysSo: a second tenure prefer waits for the first
// preference to end, and says that it waits: it says it prefers its ID
// only once its own preference holds. Its logs follow --log-format and
// --quiet, as tenure run's do.
func TestPreferWaitsAndSaysSo(t *testing.T) {
	store := "file://" + t.TempDir() + "/state"
	start := func(id string, flags ...string) (*exec.Cmd, *syncbuf.Buffer, *syncbuf.Buffer, chan struct{}) {
		out, errOut := new(syncbuf.Buffer), new(syncbuf.Buffer)
		cmd := exec.Command(tenureBin, slices.Concat([]string{"prefer", "--store", store, "--key", "job", "--ttl", "1s"}, flags, []string{id})...)
		cmd.Stdout, cmd.Stderr = out, errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out, errOut, reapAtEnd(t, cmd)
	}
	first, out1, logs1, done1 := start("a", "--log-format", "json")
	waitFor(t, func() bool { return strings.Contains(out1.String(), "job: preferring a") })
	second, out2, logs2, done2 := start("b", "--quiet")
	waitFor(t, func() bool { return strings.Contains(out2.String(), "waiting") })
	time.Sleep(500 * time.Millisecond)
	if said := out2.String(); strings.Contains(said, "preferring b") {
		t.Fatalf("the second tenure prefer said %q while the first preference held", said)
	}
	if err := first.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-done1
	waitFor(t, func() bool { return strings.Contains(out2.String(), "job: preferring b") })
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-done2
	for _, line := range strings.Split(strings.TrimSpace(logs1.String()), "\n") {
		var entry struct{ Msg, Key string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil || entry.Key != "job~tenure-prefer" {
			t.Errorf("tenure prefer --log-format json logged %q; want JSON objects with key job~tenure-prefer (%v)", line, err)
		}
	}
	if logs2.String() != "" {
		t.Errorf("tenure prefer --quiet logged %q", logs2.String())
	}
}

// TestDerivedKeyIsRefused: a --key that is itself a key kept beside
// another key (its control key, preference key or a candidate slot) is a
// usage error of the commands that keep such keys. Before, `tenure prefer
// --key job~tenure-prefer` was accepted and held job~tenure-prefer~tenure-prefer,
// which no elector reads, and `tenure run` or `tenure step-down` worked on
// job's control key as if it were a lease of its own.
func TestDerivedKeyIsRefused(t *testing.T) {
	store := "file://" + t.TempDir()
	parse := map[string]func([]string, io.Writer, io.Writer) (int, bool){
		"prefer": func(a []string, o, e io.Writer) (int, bool) { _, c, d := parsePrefer(a, o, e); return c, d },
		"step-down": func(a []string, o, e io.Writer) (int, bool) {
			_, c, d := parseStepDown(a, o, e)
			return c, d
		},
		"run": func(a []string, o, e io.Writer) (int, bool) { _, c, d := parseRun(a, o, e); return c, d },
	}
	for _, tc := range []struct {
		cmd  string
		args []string
		want string
	}{
		{"prefer", []string{"--key", "job~tenure-prefer", "b"}, `--key "job~tenure-prefer" is the preference key of "job", not a lease: use --key "job"`},
		{"prefer", []string{"--key", "job~tenure-control", "b"}, `--key "job~tenure-control" is the control key of "job", not a lease: use --key "job"`},
		{"step-down", []string{"--key", "job~tenure-control"}, `--key "job~tenure-control" is the control key of "job", not a lease: use --key "job"`},
		{"step-down", []string{"--key", "job~tenure-prefer"}, `--key "job~tenure-prefer" is the preference key of "job", not a lease: use --key "job"`},
		{"run", []string{"--key", "job~tenure-control", "--", "true"}, `--key "job~tenure-control" is the control key of "job", not a lease: use --key "job"`},
		{"run", []string{"--key", "job~tenure-candidate-03", "--", "true"}, `--key "job~tenure-candidate-03" is candidate slot 03 of "job", not a lease: use --key "job"`},
	} {
		var stdout, stderr bytes.Buffer
		code, done := parse[tc.cmd](append([]string{"--store", store}, tc.args...), &stdout, &stderr)
		if line := stderr.String(); !done || code != exitUsage || line != "tenure: "+tc.want+"\n" {
			t.Errorf("tenure %s %q: done %t, exit %d, stderr %q; want exit %d and %q", tc.cmd, tc.args, done, code, line, exitUsage, tc.want)
		}
	}
	// From $TENURE_KEY, the message names the variable, as every error
	// about a value from the environment does.
	t.Setenv(envKey, "job~tenure-control")
	for _, tc := range []struct {
		cmd  string
		args []string
	}{{"prefer", []string{"b"}}, {"step-down", nil}, {"run", []string{"--", "true"}}} {
		var stdout, stderr bytes.Buffer
		code, done := parse[tc.cmd](append([]string{"--store", store}, tc.args...), &stdout, &stderr)
		want := `tenure: $TENURE_KEY "job~tenure-control" is the control key of "job", not a lease: set $TENURE_KEY to "job"` + "\n"
		if line := stderr.String(); !done || code != exitUsage || line != want {
			t.Errorf("TENURE_KEY=job~tenure-control tenure %s: done %t, exit %d, stderr %q; want exit %d and %q", tc.cmd, done, code, line, exitUsage, want)
		}
	}
	t.Setenv(envKey, "")
	// Keys that only look alike are leases of their own.
	for _, k := range []string{"job~tenure-candidate-3", "job~tenure-prefer-x", "~tenure-control", "job~tenure-candidate-ab"} {
		var stdout, stderr bytes.Buffer
		if _, code, done := parseStepDown([]string{"--store", store, "--key", k}, &stdout, &stderr); done {
			t.Errorf("tenure step-down --key %q: exit %d, stderr %q; want it accepted", k, code, stderr.String())
		}
	}
}

// TestStepDownOfALoneLeaderSaysItLeadsAgain: with no other candidate, the
// leader that stepped down takes the key back once the window ends, and
// step-down says that nobody else took over. It used to print only "a
// leads, term 2", which reads as a hand-over: an operator moving
// leadership off a node before maintenance went on with the leader.
func TestStepDownOfALoneLeaderSaysItLeadsAgain(t *testing.T) {
	c := testCluster(t, "job", []string{"--ttl", "2s", "--quiet"}, nil)
	startCandidates(t, c, "a")
	r := runTenure(t, "step-down", "--store", c.storeURL, "--key", "job", "--window", "500ms")
	if r.code != exitOK || !strings.Contains(r.stdout, "job: a leads, term 2,") ||
		!strings.Contains(r.stdout, "(nobody else took over within the window: a leads again)") {
		t.Fatalf("step-down of a lone leader: exit %d, stdout %q, stderr %q; want 0, a leading again, said so", r.code, r.stdout, r.stderr)
	}
	c.stopAll(10 * time.Second)
	requireNoOverlap(t, c)
}

// TestSecondStepDownIsRefusedInOneLine: a step-down while another one's
// window is live (one made with --no-wait) is refused (exit 1) with one
// line that says so once. It used to quote the control key's record
// after the library's message: "...is under way for 9.8s: tenure: key
// "job~tenure-control" is held by "tenure-step-down" (term 1, 9.8s left)".
func TestSecondStepDownIsRefusedInOneLine(t *testing.T) {
	t.Parallel()
	store := testserver.Redis(t, false).URL(0)
	holdKey(t, store, "job")
	var out bytes.Buffer
	startTenure(t, &out, nil, "run", "--store", store, "--key", "job", "--id", "b", "--quiet", "--", "sleep", "60")
	waitFor(t, func() bool {
		r := runTenure(t, "status", "--store", store, "--key", "job", "--candidates")
		return strings.Contains(r.stdout, "candidates (2,")
	})
	if r := runTenure(t, "step-down", "--store", store, "--key", "job", "--no-wait"); r.code != exitOK {
		t.Fatalf("first step-down --no-wait: exit %d, stderr %q", r.code, r.stderr)
	}
	r := runTenure(t, "step-down", "--store", store, "--key", "job")
	if r.code != exitRuntime || strings.Count(r.stderr, "\n") != 1 || strings.Count(r.stderr, "tenure") != 1 ||
		!strings.HasPrefix(r.stderr, `tenure: step-down of "job": another step-down is under way, `) {
		t.Fatalf("second step-down: exit %d, stderr %q; want %d and one line saying another is under way", r.code, r.stderr, exitRuntime)
	}
}
