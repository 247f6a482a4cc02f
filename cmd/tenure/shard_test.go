package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/shard"
)

// shardGroup is a group of `tenure shard` members on a local store in a
// test's temporary directory, each running the demo worker as CMD. Each
// key has its own event log and lock file: the worker's start line says
// "overlap" if another worker of the same key was alive, and the shared
// checker (checkHistory) finds overlapping intervals and terms that did
// not grow, per key.
type shardGroup struct {
	dir, store  string
	keys        []string
	workerFlags string               // more flags for the worker
	logs        map[string]*eventLog // by key
	procs       map[string]*candidate
	stderr      map[string]*syncbuf.Buffer
}

func newShardGroup(t *testing.T, keys []string) *shardGroup {
	t.Helper()
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	g := &shardGroup{dir: dir, store: "file://" + state, keys: keys, logs: map[string]*eventLog{},
		procs: map[string]*candidate{}, stderr: map[string]*syncbuf.Buffer{}}
	for _, k := range keys {
		l, err := newEventLog(filepath.Join(dir, "events."+k))
		if err != nil {
			t.Fatal(err)
		}
		g.logs[k] = l
		t.Cleanup(func() { l.Close() })
	}
	t.Cleanup(func() {
		if t.Failed() {
			for id, b := range g.stderr {
				t.Logf("member %s's log:\n%s", id, b.String())
			}
			for _, k := range g.keys {
				for _, e := range g.logs[k].events() {
					t.Logf("key %s: %+v", k, e)
				}
			}
		}
	})
	return g
}

// start starts member id of members with extra flags, with --shards if
// the group's keys are shard.Numbered's, else with --keys.
func (g *shardGroup) start(t *testing.T, id string, members []string, extra ...string) {
	t.Helper()
	// CMD picks its key's event log and lock from TENURE_KEY.
	worker := `exec "$0" __demo-worker --events "$1/events.$TENURE_KEY" --lock "$1/lock.$TENURE_KEY" ` + g.workerFlags
	keys := []string{"--shards", strconv.Itoa(len(g.keys))}
	if !slices.Equal(g.keys, shard.Numbered(len(g.keys))) {
		keys = []string{"--keys", strings.Join(g.keys, ",")}
	}
	args := slices.Concat([]string{"shard", "--store", g.store, "--group", "jobs", "--members", strings.Join(members, ","),
		"--id", id, "--ttl", "2s"}, keys, extra)
	args = append(args, "--", "sh", "-c", worker, tenureBin, g.dir)
	stderr := &syncbuf.Buffer{}
	cmd := exec.Command(tenureBin, args...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	g.procs[id] = &candidate{ID: id, Cmd: cmd, Done: reapAtEnd(t, cmd)}
	g.stderr[id] = stderr
}

// awaitLeader waits until key's CMD was started by member id, after the
// event at index from, and returns that start and its index.
func (g *shardGroup) awaitLeader(t *testing.T, key, id string, from int) (workerEvent, int) {
	t.Helper()
	ev, i, ok := g.logs[key].waitFor(from, wait, func(e workerEvent) bool { return e.Kind == "start" && e.ID == id })
	if !ok {
		t.Fatalf("key %s: no CMD started by %s within %s", key, id, wait)
	}
	return ev, i
}

// check fails t at once if, for some key, two CMDs ran at once or terms
// did not grow so far, by the checker every harness shares.
func (g *shardGroup) check(t *testing.T) {
	t.Helper()
	bad := false
	for _, k := range g.keys {
		if h := checkHistory(g.logs[k].events()); h.Overlaps != 0 || !h.TermsGrow {
			t.Errorf("key %s: %d overlapping CMDs, terms growing: %v", k, h.Overlaps, h.TermsGrow)
			bad = true
		}
	}
	if bad {
		t.FailNow()
	}
}

// TestShardSpreadsKeysAndMovesThemSafely: three `tenure shard` members
// lead the 6 keys of a group as rendezvous hashing says; a member stopped
// by SIGTERM stops its CMDs and exits 0, and only its keys move, each
// started by its new owner after the old CMD stopped; a member killed by
// SIGKILL takes its CMDs with it (supervisor semantics) and the last
// member takes its keys over. For every key, no two CMDs ever ran at once
// and terms only grew.
func TestShardSpreadsKeysAndMovesThemSafely(t *testing.T) {
	keys := shard.Numbered(6)
	all := []string{"a", "b", "c"}
	g := newShardGroup(t, keys)
	for _, id := range all {
		g.start(t, id, all)
	}
	h := leadAll(t, g, keys, all)
	victim, killed, survivor := "a", "b", "c"
	h.terminate(t, g, keys, victim, []string{killed, survivor})
	h.kill(t, g, keys, killed, survivor)

	// The survivor leads everything; SIGTERM stops every CMD, exit 0.
	g.stopMember(t, survivor)
	for _, k := range keys {
		if _, _, ok := h.stopOf(g, k); !ok {
			t.Errorf("key %s: %s's CMD did not stop before it exited", k, survivor)
		}
	}
	g.check(t)
}

// shardHistory follows, for each key, the CMD running now and the index
// after its start in the key's log.
type shardHistory struct {
	last map[string]workerEvent
	next map[string]int
}

// leadAll waits until every key is led by its owner among members, and
// checks that the keys are spread over more than one member.
func leadAll(t *testing.T, g *shardGroup, keys, members []string) *shardHistory {
	h := &shardHistory{last: map[string]workerEvent{}, next: map[string]int{}}
	for _, k := range keys {
		ev, i := g.awaitLeader(t, k, shard.Owner(k, keys, members), 0)
		h.led(t, k, ev, i)
	}
	count := h.perMember()
	t.Logf("keys per member with %v live: %v", members, count)
	g.check(t) // the keys bounced while the members joined
	if len(count) < 2 {
		t.Fatalf("all keys on one member: %v", count)
	}
	return h
}

// led records ev, found at index i of key's log, as key's current CMD,
// checking that its term grew.
func (h *shardHistory) led(t *testing.T, key string, ev workerEvent, i int) {
	if prev, ok := h.last[key]; ok && ev.Term <= prev.Term {
		t.Errorf("key %s: term %d after term %d", key, ev.Term, prev.Term)
	}
	h.last[key], h.next[key] = ev, i+1
}

// perMember counts the keys each member leads.
func (h *shardHistory) perMember() map[string]int {
	count := map[string]int{}
	for _, ev := range h.last {
		count[ev.ID]++
	}
	return count
}

// stopOf waits for the stop of key's current CMD.
func (h *shardHistory) stopOf(g *shardGroup, key string) (workerEvent, int, bool) {
	pid := h.last[key].PID
	return g.logs[key].waitFor(h.next[key], wait, func(e workerEvent) bool { return e.Kind == "stop" && e.PID == pid })
}

// terminate sends SIGTERM to victim: its CMDs stop, its keys (and the few
// others the balance moves) go to their owners among rest, each started
// after the old CMD stopped, it exits 0, and no other key moves.
func (h *shardHistory) terminate(t *testing.T, g *shardGroup, keys []string, victim string, rest []string) {
	owners := shard.Assign(keys, rest)
	theirs := map[string]bool{} // the keys that move
	for _, k := range keys {
		theirs[k] = h.last[k].ID != owners[k]
		if h.last[k].ID == victim && !theirs[k] {
			t.Fatalf("key %s: %s leads it, and Assign gives it to %s among %v", k, victim, owners[k], rest)
		}
	}
	if h.perMember()[victim] == 0 {
		t.Fatalf("%s leads no key; the test needs it to lead some: %v", victim, h.perMember())
	}
	t0 := monoNow()
	if err := g.procs[victim].Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for _, k := range keys {
		if !theirs[k] {
			continue
		}
		from := h.last[k].ID
		stop, i, ok := h.stopOf(g, k)
		if !ok {
			t.Fatalf("key %s: %s's CMD did not stop", k, from)
		}
		ev, j := g.awaitLeader(t, k, owners[k], i+1)
		t.Logf("key %s moved %s -> %s: CMD stopped %s after the SIGTERM, next started %s after the stop",
			k, from, ev.ID, time.Duration(stop.Mono-t0), time.Duration(ev.Mono-stop.Mono))
		h.led(t, k, ev, j)
		moved++
	}
	g.awaitExit(t, victim)
	// Only the keys whose owner changed moved: no other key's CMD stopped
	// or started.
	for _, k := range keys {
		if n := g.logs[k].length(); !theirs[k] && n != h.next[k] {
			t.Errorf("key %s, whose owner did not change, moved: %d events after its CMD started", k, n-h.next[k])
		}
	}
	t.Logf("after SIGTERM of %s: %d keys moved, keys per member %v", victim, moved, h.perMember())
	g.check(t)
}

// kill sends SIGKILL to killed: its CMDs die with it, before survivor's
// CMD for any of its keys starts (the worker's lock would say overlap).
func (h *shardHistory) kill(t *testing.T, g *shardGroup, keys []string, killed, survivor string) {
	t1 := monoNow()
	if err := g.procs[killed].Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if h.last[k].ID != killed {
			continue
		}
		old := h.last[k]
		ev, j := g.awaitLeader(t, k, survivor, h.next[k])
		if alive(old.PID) {
			t.Errorf("key %s: %s's CMD (pid %d) still runs after %s took the key", k, killed, old.PID, survivor)
		}
		t.Logf("key %s taken over by %s %s after the SIGKILL of %s", k, survivor, time.Duration(ev.Mono-t1), killed)
		h.led(t, k, ev, j)
	}
}

// stopMember sends SIGTERM to member id and waits for its exit, code 0.
func (g *shardGroup) stopMember(t *testing.T, id string) {
	if err := g.procs[id].Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	g.awaitExit(t, id)
}

// awaitExit waits for member id to exit and checks it exited 0.
func (g *shardGroup) awaitExit(t *testing.T, id string) {
	waitDone(t, g.procs[id].Done, wait, "member "+id)
	if code := exitCode(g.procs[id].Cmd.ProcessState); code != exitOK {
		t.Fatalf("member %s exited %d after SIGTERM, want 0", id, code)
	}
}

// TestShardBadInput: each bad command line gives exit 2, one line
// "tenure: ..." naming the flag, and runs nothing.
func TestShardBadInput(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(dir, "ran")
	cmd := []string{"--", "touch", ran}
	base := []string{"shard", "--store", "file://" + state, "--group", "jobs"}
	line := func(args ...string) []string { return slices.Concat(base, args, cmd) }
	cases := []struct {
		name  string
		args  []string
		envID string // $TENURE_ID, if set
		want  string
	}{
		{"no members", line("--id", "a", "--shards", "4"), "", "--members is required"},
		{"duplicate member", line("--members", "a,b,a", "--id", "a", "--shards", "4"), "", `--members lists "a" twice`},
		{"empty member", line("--members", "a,,b", "--id", "a", "--shards", "4"), "", `--members "a,,b" has an empty item`},
		{"member with a control character", line("--members", "a,b\tc", "--id", "a", "--shards", "4"), "", `--members: member "b\tc"`},
		{"id not a member", line("--members", "a,b", "--id", "x", "--shards", "4"), "", `--id "x" is not one of --members (a,b)`},
		{"TENURE_ID not a member", line("--members", "a,b", "--shards", "4"), "zed", `$TENURE_ID "zed" is not one of --members (a,b)`},
		{"no id, none in the environment", line("--members", "a,b", "--shards", "4"), "", "is not one of --members (a,b)"},
		{"shards and keys", line("--members", "a", "--id", "a", "--shards", "4", "--keys", "x,y"), "", "--shards and --keys are both given; use one"},
		{"neither shards nor keys", line("--members", "a", "--id", "a"), "", "one of --shards N or --keys LIST is required"},
		{"zero shards", line("--members", "a", "--id", "a", "--shards", "0"), "", "--shards 0 is out of range: want 1 to 4096"},
		{"negative shards", line("--members", "a", "--id", "a", "--shards", "-3"), "", "--shards -3 is out of range: want 1 to 4096"},
		{"too many shards", line("--members", "a", "--id", "a", "--shards", "4097"), "", "--shards 4097 is out of range: want 1 to 4096"},
		{"shards not a number", line("--members", "a", "--id", "a", "--shards", "six"), "", `invalid value "six" for flag -shards`},
		{"duplicate key", line("--members", "a", "--id", "a", "--keys", "k1,k2,k1"), "", `--keys lists "k1" twice`},
		{"empty key", line("--members", "a", "--id", "a", "--keys", "k1,,k2"), "", `--keys "k1,,k2" has an empty item`},
		{"empty keys", line("--members", "a", "--id", "a", "--keys", ""), "", "--keys is required"},
		{"no group", slices.Concat([]string{"shard", "--store", "file://" + state, "--members", "a", "--id", "a", "--shards", "2"}, cmd), "", "--group is required"},
		{"group whose leases could be another group's", slices.Concat([]string{"shard", "--store", "file://" + state, "--group", "a/keys/b", "--members", "m", "--id", "m", "--shards", "2"}, cmd), "",
			`--group: invalid argument: shard: group "a/keys/b" has the path segment "keys", so its leases could be another group's (a/keys/b/members/ID is also key "b/members/ID" of group "a"); rename the group`},
		{"key reserved by leadership control", line("--members", "a", "--id", "a", "--keys", "k1,k2~tenure-control"), "", `--keys: key "k2~tenure-control": lease "jobs/keys/k2~tenure-control" is the control key of "jobs/keys/k2", reserved by leadership control`},
		{"bad --http", line("--members", "a", "--id", "a", "--shards", "2", "--http", "8080"), "", `--http "8080": `},
		{"peer store", slices.Concat([]string{"shard", "--store", "peer://?id=1&peers=1=127.0.0.1:1", "--group", "jobs", "--members", "1", "--id", "1", "--shards", "2"}, cmd), "", "--store: a peer:// group leads one key"},
		{"no command", slices.Concat(base, []string{"--members", "a", "--id", "a", "--shards", "2"}), "", "shard: no command given"},
		{"command not found", slices.Concat(base, []string{"--members", "a", "--id", "a", "--shards", "2", "--", "/nonexistent/cmd"}), "", `shard: command "/nonexistent/cmd" not found`},
		{"ttl too short", line("--members", "a", "--id", "a", "--shards", "2", "--ttl", "100ms"), "", "--ttl 100ms is out of range"},
		{"grace too long", line("--members", "a", "--id", "a", "--shards", "2", "--ttl", "1s", "--grace", "5s"), "", "--grace 5s is too long for --ttl 1s"},
		{"unknown flag", line("--members", "a", "--id", "a", "--shards", "2", "--restart"), "", "flag provided but not defined: -restart"},
		{"status with a command", line("--members", "a", "--shards", "2", "--status"), "", `--status runs no command; remove "touch `},
		{"json without status", line("--members", "a", "--id", "a", "--shards", "2", "--json"), "", "--json is for --status"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envID, tc.envID)
			t.Setenv("POD_NAME", "")
			r := runTenure(t, tc.args...)
			lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
			if r.code != exitUsage || len(lines) != 1 || !strings.HasPrefix(lines[0], "tenure: ") || !strings.Contains(lines[0], tc.want) {
				t.Fatalf("tenure %s: exit %d, stderr %q; want exit 2 and one line with %q", strings.Join(tc.args, " "), r.code, r.stderr, tc.want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Fatal("CMD ran")
			}
		})
	}
}

// TestShardHelp: tenure shard -h documents the command, and the top-level
// usage lists it.
func TestShardHelp(t *testing.T) {
	r := runTenure(t, "shard", "-h")
	for _, want := range []string{"Usage: tenure shard", "TENURE_KEY", "TENURE_TERM", "-shards N", "-keys LIST", "-members LIST", "-grace", "Exit codes"} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("tenure shard -h: exit %d, output lacks %q:\n%s", r.code, want, r.stdout)
		}
	}
	if r := runTenure(t, "help"); !strings.Contains(r.stdout, "tenure shard") {
		t.Errorf("tenure help does not list tenure shard:\n%s", r.stdout)
	}
}

// TestShardFrozenMember: SIGSTOP of a member cannot keep its CMDs
// running: each key's supervisor stops its CMD by the renew deadline, and
// the other member takes the key once the lease expired, after the stop.
// Resumed, the member becomes live again and takes its keys back, each
// after the other's CMD for it stopped.
func TestShardFrozenMember(t *testing.T) {
	keys := shard.Numbered(4)
	all := []string{"a", "b"}
	g := newShardGroup(t, keys)
	for _, id := range all {
		// A grace long enough for the worker to record its stop on a
		// loaded machine: with 250 ms (the default at a 1.5 s TTL), CI
		// once saw a CMD killed before it wrote that it stopped.
		g.start(t, id, all, "--ttl", "3s", "--grace", "800ms")
	}
	last, next := map[string]workerEvent{}, map[string]int{}
	count := map[string]int{}
	for _, k := range keys {
		owner := shard.Owner(k, keys, all)
		last[k], next[k] = g.awaitLeader(t, k, owner, 0)
		next[k]++
		count[owner]++
	}
	victim, other := "a", "b"
	if count[victim] < count[other] {
		victim, other = other, victim
	}
	t.Logf("keys per member: %v; freezing %s", count, victim)
	g.check(t)

	t0 := monoNow()
	if err := g.procs[victim].Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var victimKeys []string
	for _, k := range keys {
		if last[k].ID != victim {
			continue
		}
		victimKeys = append(victimKeys, k)
		stop, i, ok := g.logs[k].waitFor(next[k], wait, func(e workerEvent) bool { return e.Kind == "stop" && e.PID == last[k].PID })
		if !ok {
			t.Fatalf("key %s: the frozen %s's CMD was not stopped by its supervisor", k, victim)
		}
		ev, j := g.awaitLeader(t, k, other, i+1)
		if ev.Mono <= stop.Mono || ev.Term <= last[k].Term {
			t.Fatalf("key %s: %s's CMD (term %d) started at %d, %s's (term %d) stopped at %d", k, other, ev.Term, ev.Mono, victim, last[k].Term, stop.Mono)
		}
		t.Logf("key %s: frozen %s's CMD stopped %s after the SIGSTOP; %s took over %s after it",
			k, victim, time.Duration(stop.Mono-t0), other, time.Duration(ev.Mono-t0))
		last[k], next[k] = ev, j+1
	}
	g.check(t)

	// Resumed, the victim is live again and owns its keys again.
	t1 := monoNow()
	if err := g.procs[victim].Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for _, k := range victimKeys {
		ev, j := g.awaitLeader(t, k, victim, next[k])
		t.Logf("key %s back to %s %s after the SIGCONT", k, victim, time.Duration(ev.Mono-t1))
		last[k], next[k] = ev, j+1
	}
	for _, id := range all {
		if err := g.procs[id].Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range all {
		waitDone(t, g.procs[id].Done, wait, "member "+id)
		if code := exitCode(g.procs[id].Cmd.ProcessState); code != exitOK {
			t.Errorf("member %s exited %d after SIGTERM, want 0", id, code)
		}
	}
	g.check(t)
}

// TestShardRestartsACommandThatExits: a CMD that exits by itself while its
// key is led is run again, in a new term, as tenure run --restart does.
func TestShardRestartsACommandThatExits(t *testing.T) {
	keys := shard.Numbered(2)
	g := newShardGroup(t, keys)
	g.workerFlags = "--exit-after 100ms"
	g.start(t, "a", []string{"a", "b"}, "--ttl", "1s")
	for _, k := range keys {
		first, i := g.awaitLeader(t, k, "a", 0)
		stop, j, ok := g.logs[k].waitFor(i+1, wait, func(e workerEvent) bool { return e.Kind == "stop" && e.PID == first.PID })
		if !ok {
			t.Fatalf("key %s: CMD did not exit", k)
		}
		again, _ := g.awaitLeader(t, k, "a", j+1)
		if again.Term <= first.Term {
			t.Errorf("key %s: CMD ran again in term %d after term %d", k, again.Term, first.Term)
		}
		t.Logf("key %s: CMD exited, ran again %s later, term %d -> %d", k, time.Duration(again.Mono-stop.Mono), first.Term, again.Term)
	}
	if err := g.procs["a"].Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitDone(t, g.procs["a"].Done, wait, "member a")
	if code := exitCode(g.procs["a"].Cmd.ProcessState); code != exitOK {
		t.Errorf("member a exited %d after SIGTERM, want 0", code)
	}
	g.check(t)
}

// TestShardKeysByName: with --keys, TENURE_KEY is the key's name (the
// worker writes to the event log it names) and TENURE_TERM its term.
func TestShardKeysByName(t *testing.T) {
	keys := []string{"eu", "us", "asia"}
	g := newShardGroup(t, keys)
	g.start(t, "a", []string{"a"})
	for _, k := range keys {
		if ev, _ := g.awaitLeader(t, k, "a", 0); ev.Term == 0 {
			t.Errorf("key %s: CMD saw no TENURE_TERM", k)
		}
	}
	if err := g.procs["a"].Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitDone(t, g.procs["a"].Done, wait, "member a")
	if code := exitCode(g.procs["a"].Cmd.ProcessState); code != exitOK {
		t.Errorf("member a exited %d after SIGINT, want 0", code)
	}
	for _, k := range keys {
		if _, _, ok := g.logs[k].waitFor(0, wait, func(e workerEvent) bool { return e.Kind == "stop" }); !ok {
			t.Errorf("key %s: CMD did not stop before tenure exited", k)
		}
	}
	g.check(t)
}

// TestShardPublishesItsListsFingerprint: a `tenure shard` member's
// liveness grant carries the fingerprint of its member and key lists, as
// shard.Sharder publishes it, so `tenure status --key GROUP/members/ID`
// shows it and a member started with other lists is logged by the others.
func TestShardPublishesItsListsFingerprint(t *testing.T) {
	keys := []string{"eu", "us", "asia"}
	g := newShardGroup(t, keys)
	g.start(t, "a", []string{"a", "b"})
	g.awaitLeader(t, "eu", "a", 0)
	st, err := tenure.Open(context.Background(), g.store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.Get(context.Background(), "jobs/members/a")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Value, "members=2 keys=3 sha256=") {
		t.Errorf("member a's liveness value is %q, want its lists' fingerprint", r.Value)
	}
	g.start(t, "b", []string{"a", "b", "c"})
	const warning = "was given other members or keys than this one"
	deadline := time.Now().Add(wait)
	for !strings.Contains(g.stderr["a"].String(), warning) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(g.stderr["a"].String(), warning) {
		t.Errorf("member a did not log that b was given other lists")
	}
	for _, id := range []string{"a", "b"} {
		if err := g.procs[id].Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		waitDone(t, g.procs[id].Done, wait, "member "+id)
	}
}

// TestShardStatus: tenure shard --status prints, from the store alone,
// which members are live, who leads each key and its owner among them
// (shard.Assign), exit 0 while every key is led, and 3 with nobody
// running, each key then led by nobody.
func TestShardStatus(t *testing.T) {
	keys := shard.Numbered(5)
	all := []string{"a", "b", "c"}
	g := newShardGroup(t, keys)
	status := func() (shardStatusJSON, result) {
		t.Helper()
		r := runTenure(t, "shard", "--status", "--json", "--store", g.store, "--group", "jobs", "--members", strings.Join(all, ","), "--shards", "5")
		var st shardStatusJSON
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("--status --json: %v; exit %d, stdout %q, stderr %q", err, r.code, r.stdout, r.stderr)
		}
		return st, r
	}
	st, r := status()
	if r.code != exitFree || len(st.Live) != 0 || len(st.Keys) != len(keys) || st.Keys[0].Holder != "" || st.Keys[0].Owner != "" {
		t.Fatalf("nobody running: exit %d, %+v; want exit 3, nobody live, every key unled", r.code, st)
	}
	live := all[:2]
	for _, id := range live {
		g.start(t, id, all)
	}
	owners := shard.Assign(keys, live)
	for _, k := range keys {
		g.awaitLeader(t, k, owners[k], 0)
	}
	st, r = status()
	if r.code != exitOK || !slices.Equal(st.Live, live) {
		t.Fatalf("a and b running: exit %d, live %v; want exit 0, live %v", r.code, st.Live, live)
	}
	for _, k := range st.Keys {
		if k.Holder != owners[k.Key] || k.Owner != owners[k.Key] || k.Term == 0 {
			t.Errorf("key %s: %+v; want led by its owner %s, with a term", k.Key, k, owners[k.Key])
		}
	}
	text := runTenure(t, "shard", "--status", "--store", g.store, "--group", "jobs", "--members", strings.Join(all, ","), "--shards", "5")
	if !strings.HasPrefix(text.stdout, "group jobs: 2 of 3 members live (a, b); 5 of 5 keys led") {
		t.Errorf("--status: %q", text.stdout)
	}
}
