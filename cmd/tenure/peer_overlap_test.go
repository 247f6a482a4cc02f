package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/stats"
)

// peerAlgorithms are the node algorithms of package peer, with the member
// of three that a restarted member with precedence takes over from a
// healthy coordinator: lowest's 1 (always), bully's 3 (unless
// no-preempt=1); ring never preempts ("").
var peerAlgorithms = []peerAlgorithm{{"lowest", "1"}, {"bully", "3"}, {"ring", ""}}

type peerAlgorithm struct {
	name      string
	preferred string
}

// peerCluster is a cluster of three `tenure run` members 1, 2 and 3 of a
// peer group running alg on loopback TCP with the default heartbeat
// (100ms), timeout (500ms) and TTL (1.5s), each running the lean demo
// worker as CMD and campaigning again after a loss (--restart). The worker
// takes stopDelay to finish after SIGTERM (within tenure's grace), as a
// real job would: a new leader that starts its CMD as soon as the old one
// was told to stop overlaps with it.
func peerCluster(t testing.TB, alg string) *cluster {
	t.Helper()
	c := testCluster(t, "job", []string{"--quiet", "--restart"}, []string{"--stop-delay", stopDelay.String()})
	if os.Getenv("TENURE_PEER_DEBUG") != "" {
		c.runArgs, c.stderr = []string{"--restart"}, os.Stderr
	}
	c.worker = leanWorkerBin
	peerMembers(t, c, alg)
	return c
}

// stopDelay is how long the peer tests' CMDs take to stop after SIGTERM.
const stopDelay = 100 * time.Millisecond

// takeovers are the measured handovers of one run of killLeaders.
type takeovers struct {
	// crash: SIGKILL of the leading `tenure run` → the next CMD starts.
	crash []time.Duration
	// preempt: the deposed leader's CMD stops → the CMD of the restarted
	// member with precedence starts (the acknowledged handover).
	preempt []time.Duration
}

// killLeaders starts members 1, 2 and 3 of c, waits for the first CMD
// (of the preferred member, if not ""), and, rounds times, SIGKILLs the
// leading `tenure run`, waits for the next CMD to start, and restarts the
// killed member; when that is the preferred member, it then waits for it
// to take over. It stops the members and returns what it measured and the
// workers' own records.
func killLeaders(t testing.TB, c *cluster, rounds int, preferred string) (takeovers, []workerEvent) {
	t.Helper()
	for _, id := range []string{"1", "2", "3"} {
		if _, err := c.start(id); err != nil {
			t.Fatal(err)
		}
	}
	var m takeovers
	leader, i, ok := c.events.waitFor(0, wait, func(e workerEvent) bool {
		return e.Kind == "start" && (preferred == "" || e.ID == preferred)
	})
	if !ok {
		t.Fatalf("no leader (preferred %q) within %s", preferred, wait)
	}
	for range rounds {
		victim := c.get(leader.ID)
		t0 := monoNow()
		_ = victim.Cmd.Process.Kill()
		ev, j, ok := c.events.nextStart(i+1, wait)
		if !ok {
			t.Fatalf("no new leader within %s of killing %s", wait, leader.ID)
		}
		m.crash = append(m.crash, time.Duration(ev.Mono-t0))
		<-victim.Done
		if _, err := c.start(victim.ID); err != nil {
			t.Fatal(err)
		}
		leader, i = ev, j
		if victim.ID != preferred {
			continue
		}
		// The restarted member has precedence over every other live one:
		// it takes over once it has heard the group. The
		// handover is from the old CMD's stop to the new CMD's start
		// (negative: they overlapped).
		next, l, ok := c.events.waitFor(i+1, wait, func(e workerEvent) bool { return e.Kind == "start" && e.ID == victim.ID })
		if !ok {
			t.Fatalf("restarted member %s never took over from member %s", victim.ID, leader.ID)
		}
		stop, _, ok := c.events.waitFor(i+1, wait, func(e workerEvent) bool { return e.Kind == "stop" && e.PID == leader.PID })
		if !ok {
			t.Fatalf("member %s's CMD (term %d, pid %d, running now: %t) logged no stop within %s after member %s took over; the workers' records:\n%s",
				leader.ID, leader.Term, leader.PID, alive(leader.PID), wait, victim.ID, describeEvents(c.events.events()))
		}
		m.preempt = append(m.preempt, time.Duration(next.Mono-stop.Mono))
		leader, i = next, l
	}
	c.stopAll(10 * time.Second)
	return m, c.events.events()
}

// checkWorkers fails t unless the workers' own records show no two CMDs
// alive at once (by their start/stop lines and by the kernel lock each
// takes) and strictly growing TENURE_TERMs, over at least want terms.
func checkWorkers(t testing.TB, alg string, evs []workerEvent, want int) {
	t.Helper()
	h := checkHistory(evs)
	if h.Overlaps == 0 && h.TermsGrow && h.Starts >= want && h.FirstTerm > 0 {
		return
	}
	t.Fatalf("%s: %d overlapping CMDs, terms growing %t, %d starts (want ≥ %d), first term %d; the workers' records:\n%s",
		alg, h.Overlaps, h.TermsGrow, h.Starts, want, h.FirstTerm, describeEvents(evs))
}

// describeEvents lists the workers' records, one a line.
func describeEvents(evs []workerEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s term %d at %.3fms pid %d overlap=%t\n", e.Kind, e.ID, e.Term, float64(e.Mono)/1e6, e.PID, e.Overlap)
	}
	return b.String()
}

// TestPeerNoOverlapOnLeaderKill: for each peer algorithm, three real
// `tenure run` members; the leading one is SIGKILLed and restarted four
// times (where the algorithm preempts, the restarted member with
// precedence then takes over again). The CMDs' own records must show that
// no two ever ran at once and that terms grew. The algorithms run in
// parallel; each takes about 10-15s.
func TestPeerNoOverlapOnLeaderKill(t *testing.T) {
	const rounds = 4
	for _, alg := range peerAlgorithms {
		t.Run(alg.name, func(t *testing.T) {
			t.Parallel()
			c := peerCluster(t, alg.name)
			m := killLeadersChecked(t, c, rounds, alg)
			t.Logf("%s: crash takeover %v; preemption handover %v", alg.name, m.crash, m.preempt)
		})
	}
}

// BenchmarkPeerTakeover measures, for each peer algorithm with the default
// timing (heartbeat 100ms, timeout 500ms, TTL 1.5s) and three `tenure run`
// members on loopback: the crash takeover (SIGKILL of the leading tenure →
// the next CMD starts) and, for lowest and bully, the preemption handover
// (the deposed leader's CMD stops → the restarted member's CMD starts). It
// reports p50 and p99 (nearest rank, internal/stats) and fails on any
// overlap. TENURE_PEER_ROUNDS sets the rounds per algorithm (default 20,
// about a minute each):
//
//	go test -bench PeerTakeover -run '^$' ./cmd/tenure/
func BenchmarkPeerTakeover(b *testing.B) {
	rounds := 20
	if s := os.Getenv("TENURE_PEER_ROUNDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("TENURE_PEER_ROUNDS=%q: want a positive integer", s)
		}
		rounds = v
	}
	fmt.Printf("\n  %-8s %-34s %9s %9s %9s %9s\n", "peer", fmt.Sprintf("%d rounds each", rounds), "p50", "p99", "min", "max")
	for _, alg := range peerAlgorithms {
		c := peerCluster(b, alg.name)
		m := killLeadersChecked(b, c, rounds, alg)
		for _, r := range []struct {
			name string
			d    []time.Duration
		}{{"crash (SIGKILL tenure → next CMD)", m.crash}, {"preempt (CMD stops → next CMD)", m.preempt}} {
			if len(r.d) == 0 {
				continue
			}
			fmt.Printf("  %-8s %-34s %9s %9s %9s %9s\n", alg.name, r.name, ms(stats.Percentile(r.d, 50)), ms(stats.Percentile(r.d, 99)),
				ms(stats.Percentile(r.d, 0)), ms(stats.Percentile(r.d, 100)))
			tag := strings.Fields(r.name)[0]
			b.ReportMetric(float64(stats.Percentile(r.d, 50))/1e6, alg.name+"-"+tag+"-p50-ms")
			b.ReportMetric(float64(stats.Percentile(r.d, 99))/1e6, alg.name+"-"+tag+"-p99-ms")
		}
	}
	b.ReportMetric(0, "ns/op")
}

// killLeadersChecked runs killLeaders on c and checks the workers' history:
// one first term, one per crash, and one per preemption for algorithms
// with a preferred member.
func killLeadersChecked(tb testing.TB, c *cluster, rounds int, alg peerAlgorithm) takeovers {
	tb.Helper()
	m, evs := killLeaders(tb, c, rounds, alg.preferred)
	want := 1 + rounds
	if alg.preferred != "" {
		want += rounds
	}
	checkWorkers(tb, alg.name, evs, want)
	return m
}
