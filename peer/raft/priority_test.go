package raft

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
)

// TestPriorityZeroNeverLeads: members 0 and 1 have priority 0 and member 2
// is down, so raft can only elect 0 or 1: neither grants the key nor
// reports itself holding it, nor anyone in the term it leads, and whichever
// raft elects hands leadership away within a few heartbeat timeouts. (A
// member that raft left meanwhile may name the other priority-0 member as
// holder, in the later term: a node knows no priority but its own.) Once
// member 2 starts, it becomes and stays leader, and grants.
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
				// Each attempt to hand it to member 2, which is down, fails
				// only after raft's transfer timeout: beside other tests
				// (other goroutines interleaving at the same virtual
				// instants), 210 runs held it 0.375–1.375 s; 20 heartbeat
				// timeouts is a bound that still catches a member that
				// never hands it on.
				if d := time.Since(led[i]); d > 20*testHB {
					t.Fatalf("member %d, of priority 0, has led raft for %s", i, d)
				}
				// The raft term member i leads in. Raft may move on to the
				// other member of priority 0 before the calls below; that
				// member's priority is not known to member i (a node knows
				// only its own), so a record of a later term may name it.
				id, term := leaderNow(n.Raft())
				if id != c.ids[i] {
					continue // already moved on
				}
				var held *tenure.HeldError
				if l, err := n.Acquire(ctx, "k", c.ids[i], testHB); err == nil {
					t.Fatalf("member %d, of priority 0, granted %+v", i, l)
				} else if !errors.Is(err, ErrSteppingDown) && !errors.Is(err, tenure.ErrUnavailable) &&
					!(errors.As(err, &held) && held.Record.Holder != c.ids[i] && held.Record.Term > term) {
					// ErrUnavailable, or the key held by another member in a
					// later term (seen once in CI: "held by n1 (term 16)"):
					// raft moved leadership on between the read above and
					// the Acquire.
					t.Fatalf("member %d, of priority 0, refused with %v; want ErrSteppingDown (or ErrUnavailable, or held by another member in a later term, once it handed over)", i, err)
				}
				if r, _ := n.Get(ctx, "k"); r.Held() && (r.Holder == c.ids[i] || r.Term <= term) {
					t.Fatalf("member %d, of priority 0 and raft leader in term %d, reports the key held: %+v", i, term, r)
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

// TestYieldAfterRaft: members 1 and 2 (default priority) elect one of
// them; member 3, of priority 5, joins later. The leader's elector, with
// Control.YieldAfter, sees member 3 (the leader asks the members over the
// status protocol), steps down to it after YieldAfter, and raft hands
// leadership to it (LeadershipTransferToServer): member 3's task starts
// after the old one ended with ErrSteppedDown, and no tasks overlap. An
// observer lists the members with their priorities.
func TestYieldAfterRaft(t *testing.T) {
	urls := peerURLs(t, 3, "")
	urls[2] += "&priority=5"
	sp, ctx := newSpans(t)
	defer sp.stop()
	start := func(i int, prio int) {
		s, err := tenure.Open(peer.WithLogger(ctx, slog.New(slog.DiscardHandler)), urls[i])
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		el, err := tenure.New(tenure.Config{Store: s, Key: "job", Logger: slog.New(slog.DiscardHandler),
			Control: &tenure.Control{Priority: prio, YieldAfter: 500 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		sp.run(ctx, el)
	}
	start(0, tenure.DefaultPriority)
	start(1, tenure.DefaultPriority)
	first := sp.next(true)
	if first.id == "3" {
		t.Fatalf("member 3 led before it started: %+v", first)
	}
	start(2, 5)
	// On a busy machine a renewal can miss its deadline (200 ms at this
	// 300 ms TTL) and end the leader's task before the yield. That is not
	// what this test is about: the elector campaigns again, and the test
	// waits for the yield of whoever leads then, a few times at most.
	e := sp.next(false)
	for try := 0; errors.Is(e.cause, tenure.ErrRenewDeadline) && e.id == first.id && try < 3; try++ {
		t.Logf("task of %s ended with %v before the yield; waiting for the next leader's", e.id, e.cause)
		if first = sp.next(true); first.id == "3" {
			t.Fatalf("member 3 won raft leadership after that loss, without a yield: the test checked nothing")
		}
		e = sp.next(false)
	}
	if e.id != first.id || !errors.Is(e.cause, tenure.ErrSteppedDown) {
		t.Fatalf("task of %s ended with %v; want %s stepping down", e.id, e.cause, first.id)
	}
	if s := sp.next(true); s.id != "3" || s.term <= first.term {
		t.Fatalf("after the yield %s leads term %d; want 3 above term %d", s.id, s.term, first.term)
	}
	if n := sp.overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping tasks", n)
	}
	obs := openTestObserver(t, observerURL(t, urls[0], ""))
	cs, err := obs.(interface {
		Candidates(context.Context, string) ([]tenure.Candidate, error)
	}).Candidates(ctx, "job")
	if err != nil || len(cs) != 3 || cs[0].Identity != "3" || cs[0].Priority != 5 || cs[1].Priority != tenure.DefaultPriority {
		t.Fatalf("observer candidates %+v, %v; want member 3 (priority 5) first, then 1 and 2", cs, err)
	}
}
