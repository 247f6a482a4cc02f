package main

import (
	"bytes"
	"maps"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestPeerRaftTimeoutMismatch: three raft members, 1 and 2 with the
// default timeout (500ms), 3 started with timeout=3s and so a TTL of 3s.
// Made leader (a step-down naming it), member 3 used to run its CMD with a
// 3s lease while 1 and 2 may elect another leader 0.5-1s after losing it:
// SIGSTOPped, its CMD outlived the start of the next leader's by 0.5s.
// Now it refuses to grant and its tenure run exits 2 naming the members
// whose timeout is shorter, and 1 or 2 leads.
func TestPeerRaftTimeoutMismatch(t *testing.T) {
	dir := t.TempDir()
	group := peerParams(t, "raft", dir, 3)
	member := func(id, extra string) string {
		q := url.Values{"id": {id}, "state-dir": {dir}}
		maps.Copy(q, group)
		return "peer://?" + q.Encode() + extra
	}
	observer := "peer://?" + group.Encode()
	for _, id := range []string{"1", "2"} {
		startTenure(t, nil, nil, "run", "--quiet", "--restart", "--key", "job", "--store", member(id, ""), "--", "sleep", "60")
	}
	var stderr bytes.Buffer // read once the process exited
	long, done := startTenure(t, nil, &stderr, "run", "--quiet", "--key", "job", "--store", member("3", "&timeout=3s"), "--", "sleep", "60")
	deadline := time.Now().Add(wait)
	for {
		r := runTenure(t, "step-down", "--key", "job", "--store", observer, "--to", "3", "--window", "600ms")
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("step-down to 3 never succeeded; last: code %d, %s", r.code, r.stderr)
		}
		time.Sleep(100 * time.Millisecond) // polling: no leader yet to ask
	}
	waitDone(t, done, wait, "member 3's tenure run")
	line := strings.TrimSpace(stderr.String())
	if !strings.Contains(line, "a majority that may elect another leader") || !strings.Contains(line, "1 (500ms), 2 (500ms)") {
		t.Errorf("member 3 said %q; want a refusal naming members 1 and 2 and their timeout", line)
	}
	if code := long.ProcessState.ExitCode(); code != 2 {
		t.Errorf("member 3 exited %d, want 2 (a misconfiguration)", code)
	}
	r := runTenure(t, "status", "--key", "job", "--store", observer)
	for time.Now().Before(deadline) && (r.code != 0 || strings.Contains(r.stdout, "3 leads")) {
		time.Sleep(100 * time.Millisecond) // polling: the election after 3 left
		r = runTenure(t, "status", "--key", "job", "--store", observer)
	}
	if r.code != 0 || !(strings.Contains(r.stdout, "1 leads") || strings.Contains(r.stdout, "2 leads")) {
		t.Errorf("after member 3 left: status code %d, %q; want 1 or 2 leading", r.code, r.stdout)
	}
}

// TestPeerRaftShortTimeout: a raft member's default TTL is its timeout,
// the longest TTL it grants. With timeout=200ms, tenure run without --ttl
// said "--ttl 200ms is out of range", naming a flag nobody gave, and --ttl
// 500ms was refused by raft: now the first says what to set (--ttl and
// timeout= of at least 500ms).
func TestPeerRaftShortTimeout(t *testing.T) {
	dir := t.TempDir()
	group := peerParams(t, "raft", dir, 3)
	member := func(extra string) string {
		q := url.Values{"id": {"1"}, "state-dir": {dir}}
		maps.Copy(q, group)
		return "peer://?" + q.Encode() + extra
	}
	r := runTenure(t, "run", "--key", "job", "--store", member("&timeout=200ms"), "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "default TTL, 200ms") || !strings.Contains(r.stderr, "timeout=500ms or more") {
		t.Errorf("run with timeout=200ms: code %d, stderr %q; want %d saying to set timeout=500ms or more", r.code, r.stderr, exitUsage)
	}
	if strings.Contains(r.stderr, "--ttl 200ms is out of range") {
		t.Errorf("run with timeout=200ms blames a --ttl nobody gave: %q", r.stderr)
	}
}

// TestPeerRaftStepDownTargetDies: three raft `tenure run` members, 3 of
// priority 0 (it never leads, so raft can only re-elect 1 or 2). After
// `tenure step-down --to X --window 20s`, X leads and is killed (SIGKILL).
// The old leader's node kept serving the request for the whole window, so
// when raft re-elected it, it held back and the key stayed unled until the
// window ended. Now its CMD starts again within a few election timeouts,
// after X's stopped, in a higher term.
func TestPeerRaftStepDownTargetDies(t *testing.T) {
	c, obs := peerControlCluster(t, "raft")
	member := c.storeFor
	c.storeFor = func(id string) string {
		if id == "3" {
			return member(id) + "&priority=0"
		}
		return member(id)
	}
	leader, i := startCandidates(t, c, "1", "2", "3")
	x := otherThan(leader.ID, "2", "1")
	const window = 20 * time.Second
	r := runTenure(t, "step-down", "--store", obs, "--key", "job", "--to", x, "--window", window.String())
	if h, _ := reportedLeader(t, r.stdout); r.code != exitOK || h != x {
		t.Fatalf("step-down --to %s: exit %d, stdout %q, stderr %q", x, r.code, r.stdout, r.stderr)
	}
	second, j, ok := c.events.nextStart(i+1, wait)
	if !ok || second.ID != x {
		t.Fatalf("after step-down --to %s the next start is %+v (found %v)", x, second, ok)
	}
	if err := c.signal(x, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	third, _, ok := c.events.nextStart(j+1, wait)
	took := time.Since(killed)
	if !ok || third.ID != leader.ID || third.Term <= second.Term {
		t.Fatalf("after %s was killed the next start is %+v (found %v); want %s above term %d", x, third, ok, leader.ID, second.Term)
	}
	if took > window/2 {
		t.Fatalf("%s's CMD started %s after %s was killed; want well within the %s window", leader.ID, took.Round(time.Millisecond), x, window)
	}
	t.Logf("%s led again %s after %s was killed", leader.ID, took.Round(time.Millisecond), x)
	c.stopAll(10 * time.Second)
	checkWorkers(t, "raft", c.events.events(), 3)
}
