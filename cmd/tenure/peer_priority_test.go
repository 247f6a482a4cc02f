package main

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// TestPeerPriority: in every peer mode, three real `tenure run`
// members: member 1 with priority=0 in its peer URL, member 3 with the
// default priority, member 2 with --priority 5, all with --yield-after 1s
// and --restart.
// Member 1 alone never leads (status exits 3 throughout); member 3 leads
// once it starts (in raft, member 1 hands raft leadership to it if raft
// elected 1); member 2, started last, takes over (lowest and bully
// preempt; ring and raft do not, and member 3's --yield-after hands over);
// status --candidates lists the three priorities; once 2 and 3 are gone,
// member 1 is alone again and the key is free. No two CMDs overlap.
func TestPeerPriority(t *testing.T) {
	for _, alg := range []string{"lowest", "bully", "ring", "raft"} {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			c, obs := peerControlCluster(t, alg)
			member := c.storeFor
			c.storeFor = func(id string) string {
				if id == "1" {
					return member(id) + "&priority=0"
				}
				return member(id)
			}
			// --restart: a member preempted by a higher priority lost its
			// term and campaigns again (without it, tenure run exits 1).
			base := append(c.runArgs, "--restart", "--yield-after", "1s")
			c.runArgs = base
			if _, err := c.start("1"); err != nil {
				t.Fatal(err)
			}
			awaitFree(t, obs)
			stayFree(t, c, obs, 3*time.Second)

			if _, err := c.start("3"); err != nil {
				t.Fatal(err)
			}
			first, i, ok := c.events.nextStart(0, wait)
			if !ok || first.ID != "3" {
				t.Fatalf("with members 1 (priority 0) and 3 up, the first start is %+v (found %v); want 3", first, ok)
			}
			c.runArgs = append(slices.Clone(base), "--priority", "5")
			if _, err := c.start("2"); err != nil {
				t.Fatal(err)
			}
			c.runArgs = base
			next, _, ok := c.events.nextStart(i+1, wait)
			if !ok || next.ID != "2" || next.Term <= first.Term {
				t.Fatalf("after member 2 (priority 5) started, the next start is %+v (found %v); want 2", next, ok)
			}
			checkCandidatePriorities(t, obs, map[string]int{"1": 0, "2": 5, "3": 1})

			for _, id := range []string{"2", "3"} {
				if err := c.signal(id, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				waitDone(t, c.get(id).Done, wait, "member "+id)
			}
			awaitFree(t, obs)
			stayFree(t, c, obs, 2*time.Second)
			c.stopAll(10 * time.Second)
			checkWorkers(t, alg, c.events.events(), 2)
		})
	}
}

// awaitFree waits until tenure status through the observer URL obs
// reports the key free (exit 3): some member answers and none leads.
func awaitFree(t *testing.T, obs string) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		r := runTenure(t, "status", "--store", obs, "--key", "job")
		if r.code == exitFree {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status: exit %d, stdout %q, stderr %q; want the key free (exit %d)", r.code, r.stdout, r.stderr, exitFree)
		}
	}
}

// stayFree checks for d that status keeps reporting the key free and that
// no CMD starts: the live members all have priority 0.
func stayFree(t *testing.T, c *cluster, obs string, d time.Duration) {
	t.Helper()
	n := c.events.length()
	for end := time.Now().Add(d); time.Now().Before(end); {
		if r := runTenure(t, "status", "--store", obs, "--key", "job"); r.code != exitFree {
			t.Fatalf("status with only priority-0 members up: exit %d, stdout %q, stderr %q; want exit %d", r.code, r.stdout, r.stderr, exitFree)
		}
	}
	if evs := c.events.events(); len(evs) > n {
		t.Fatalf("a CMD ran with only priority-0 members up: %+v", evs[n:])
	}
}

// checkCandidatePriorities checks that status --candidates lists each
// member with its own priority.
func checkCandidatePriorities(t *testing.T, obs string, want map[string]int) {
	t.Helper()
	cands := listedCandidates(t, obs, len(want))
	for _, cand := range cands {
		if p, ok := want[cand.ID]; !ok || p != cand.Priority {
			t.Fatalf("status --candidates lists %+v; want priorities %v", cands, want)
		}
	}
	if cands[0].ID != "2" {
		t.Fatalf("status --candidates lists %+v; want the highest priority (2) first", cands)
	}
}
