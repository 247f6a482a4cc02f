package main

import (
	"testing"
	"time"
)

// TestPeerNoPreempt: in bully with no-preempt=1, a member that ranks
// higher and starts while another leads follows that leader: no CMD
// starts, none stops. Member 3 started, or restarted after two seconds
// down, while member 2 led; each time it once stood for election before
// hearing the leader (whose redials to it had backed off) and deposed it.
func TestPeerNoPreempt(t *testing.T) {
	c := peerCluster(t, "bully")
	member := c.storeFor
	c.storeFor = func(id string) string { return member(id) + "&no-preempt=1" }
	for _, id := range []string{"1", "2"} {
		if _, err := c.start(id); err != nil {
			t.Fatal(err)
		}
	}
	leader, i, ok := c.events.nextStart(0, wait)
	if !ok || leader.ID != "2" {
		t.Fatalf("with members 1 and 2 up, the first start is %+v (found %v); want 2", leader, ok)
	}
	for round := range 3 {
		time.Sleep(2 * time.Second) // member 3 down: member 2's redials to it back off
		if _, err := c.start("3"); err != nil {
			t.Fatal(err)
		}
		if ev, _, ok := c.events.waitFor(i+1, 3*time.Second, func(workerEvent) bool { return true }); ok {
			t.Fatalf("round %d: member 3 started while member 2 led (no-preempt=1); then %+v", round, ev)
		}
		victim := c.get("3")
		_ = victim.Cmd.Process.Kill()
		<-victim.Done
	}
	c.stopAll(10 * time.Second)
	checkWorkers(t, "bully", c.events.events(), 1)
}
