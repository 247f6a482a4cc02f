package raft

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
)

// TestPriorityZeroNeverLeads: members 0 and 1 have priority 0 and member 2
// is down, so raft can only elect 0 or 1: neither grants the key nor
// reports itself holding it, and whichever raft elects hands leadership
// away within a few heartbeat timeouts. Once member 2 starts, it becomes
// and stays leader, and grants.
func TestPriorityZeroNeverLeads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newPriorityCluster(t, 3, testHB, map[int]int{0: tenure.NeverLead, 1: tenure.NeverLead})
		c.crash(2)
		ctx := context.Background()
		led := map[int]time.Time{} // since when each member leads without a break
		sawLeader, longest := false, time.Duration(0)
		for end := time.Now().Add(60 * testHB); time.Now().Before(end); time.Sleep(testHB / 4) {
			for i := range 2 {
				n := c.node(i)
				if n.Raft().State() != hraft.Leader {
					delete(led, i)
					continue
				}
				sawLeader = true
				if _, ok := led[i]; !ok {
					led[i] = time.Now()
				}
				longest = max(longest, time.Since(led[i]))
				if d := time.Since(led[i]); d > 10*testHB {
					t.Fatalf("member %d, of priority 0, has led raft for %s", i, d)
				}
				if l, err := n.Acquire(ctx, "k", c.ids[i], testHB); err == nil {
					t.Fatalf("member %d, of priority 0, granted %+v", i, l)
				} else if !errors.Is(err, ErrSteppingDown) {
					t.Fatalf("member %d, of priority 0, refused with %v; want ErrSteppingDown", i, err)
				}
				if r, _ := n.Get(ctx, "k"); r.Held() {
					t.Fatalf("member %d, of priority 0 and raft leader, reports the key held: %+v", i, r)
				}
			}
		}
		if !sawLeader {
			t.Fatal("raft never elected a member of priority 0: the test checked nothing")
		}
		t.Logf("a member of priority 0 led raft for at most %s (virtual time)", longest)

		c.start(2)
		if li := awaitLeader(t, c, 40*testHB, 0, 1); li != 2 {
			t.Fatalf("leader %d; want member 2", li)
		}
		time.Sleep(20 * testHB)
		if ls := c.leaders(); len(ls) != 1 || ls[0] != 2 {
			t.Fatalf("raft leaders %v after 20 heartbeats; want member 2 alone", ls)
		}
		if _, err := c.node(2).Acquire(ctx, "k", c.ids[2], testHB); err != nil {
			t.Fatalf("member 2 (default priority) does not grant: %v", err)
		}
	})
}
