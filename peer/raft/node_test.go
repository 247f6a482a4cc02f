package raft

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
)

const testHB = 100 * time.Millisecond

// awaitLeader waits, on watch events, until a running member other than
// those in not leads by raft and every running member connected to it sees
// it as leader, and returns it. It fails t after bound.
func awaitLeader(t testing.TB, c *cluster, bound time.Duration, not ...int) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	var nodes []*Node
	for i := range c.ids {
		nodes = append(nodes, c.node(i))
	}
	changed := watchAll(ctx, t, nodes)
	for {
		for _, l := range c.leaders() {
			if slices.Contains(not, l) {
				continue
			}
			if c.allSee(l) {
				return l
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("no leader (other than %v) within %s; raft leaders now %v", not, bound, c.leaders())
		}
	}
}

func TestAcquireRenewRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, testHB)
		li := awaitLeader(t, c, 20*testHB)
		checkRefusals(t, c, li)
		l := checkGrant(t, c, li)
		checkHandoverOnRelease(t, c, li, l)
		checkClosed(t, c, li, l)
	})
}

// checkRefusals: followers refuse, naming leader li, and bad input is
// invalid.
func checkRefusals(t *testing.T, c *cluster, li int) {
	ctx := context.Background()
	leader := c.node(li)
	// Followers refuse, naming the leader.
	for i := range c.ids {
		if i == li {
			continue
		}
		_, err := c.node(i).Acquire(ctx, "k", c.ids[i], testHB)
		var held *tenure.HeldError
		if !errors.As(err, &held) || held.Record.Holder != c.ids[li] {
			t.Fatalf("follower %d Acquire: got %v, want HeldError naming %s", i, err, c.ids[li])
		}
	}
	// Bad input.
	if _, err := leader.Acquire(ctx, "k", "someone-else", testHB); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Acquire with a foreign identity: got %v, want ErrInvalid", err)
	}
	if _, err := leader.Acquire(ctx, "k", c.ids[li], 2*testHB); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Acquire with ttl > heartbeat timeout: got %v, want ErrInvalid", err)
	}
	if _, err := leader.Acquire(ctx, "", c.ids[li], testHB); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Acquire with an empty key: got %v, want ErrInvalid", err)
	}

}

// checkGrant: leader li grants once, in its raft term, renews, and a
// forged lease changes nothing on a follower.
func checkGrant(t *testing.T, c *cluster, li int) tenure.Lease {
	ctx := context.Background()
	leader := c.node(li)
	l, err := leader.Acquire(ctx, "k", c.ids[li], testHB)
	if err != nil {
		t.Fatalf("leader Acquire: %v", err)
	}
	if want := leader.Raft().CurrentTerm(); l.Term != want || l.Term == 0 {
		t.Fatalf("lease term %d, raft term %d", l.Term, want)
	}
	if _, err := leader.Acquire(ctx, "k", c.ids[li], testHB); !errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("second Acquire on the holder: got %v, want ErrHeld", err)
	}
	if err := leader.Renew(ctx, l); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	// A forged lease presented to a follower changes nothing there.
	fi := (li + 1) % 3
	forged := tenure.Lease{Key: "k", Identity: c.ids[fi], Term: l.Term, TTL: testHB}
	if err := c.node(fi).Renew(ctx, forged); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew on a follower: got %v, want ErrLost", err)
	}
	if err := c.node(fi).Release(ctx, forged); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Release on a follower: got %v, want ErrLost", err)
	}
	if r, _ := leader.Get(ctx, "k"); r.Holder != c.ids[li] || r.Term != l.Term {
		t.Fatalf("Get on the leader: %+v", r)
	}

	return l
}

// checkHandoverOnRelease: Release hands leadership over: a new leader in
// a higher term.
func checkHandoverOnRelease(t *testing.T, c *cluster, li int, l tenure.Lease) {
	ctx := context.Background()
	leader := c.node(li)
	// Release hands leadership over: a new leader in a higher term.
	if err := leader.Release(ctx, l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := leader.Renew(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew after Release: got %v, want ErrLost", err)
	}
	if err := leader.Release(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Release after Release: got %v, want ErrLost", err)
	}
	ni := awaitLeader(t, c, 20*testHB, li)
	l2, err := c.node(ni).Acquire(ctx, "k", c.ids[ni], testHB)
	if err != nil {
		t.Fatalf("new leader Acquire: %v", err)
	}
	if l2.Term <= l.Term {
		t.Fatalf("new term %d not above old term %d", l2.Term, l.Term)
	}
	if err := leader.Renew(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("old holder Renew after takeover: got %v, want ErrLost", err)
	}

}

// checkClosed: after Close every call says so.
func checkClosed(t *testing.T, c *cluster, li int, l tenure.Lease) {
	ctx := context.Background()
	leader := c.node(li)
	c.crash(li)
	if _, err := leader.Acquire(ctx, "k", c.ids[li], testHB); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Acquire after Close: got %v", err)
	}
	if err := leader.Renew(ctx, l); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Renew after Close: got %v", err)
	}
	if _, err := leader.Get(ctx, "k"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Get after Close: got %v", err)
	}
	if _, err := leader.Watch(ctx, "k"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Watch after Close: got %v", err)
	}
	if err := leader.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A leader cut off into a minority cannot renew or acquire; the majority
// elects a new leader with a higher term, and after healing the old one
// follows it.
func TestPartitionedLeaderLosesLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 5, testHB)
		ctx := context.Background()
		li, old, l := leaderLease(t, c)
		g := []int{0, 0, 0, 0, 0}
		g[li], g[(li+1)%5] = 1, 1 // the leader and one follower: a minority of 2
		c.partition(g)
		// Let messages already in flight land: a heartbeat a follower
		// answered just before the cut may still confirm leadership.
		synctest.Wait()

		// Every renewal from now on fails; within the leader lease timeout
		// plus a round, one fails for good.
		for lost := false; !lost; {
			rctx, cancel := context.WithTimeout(ctx, testHB/4)
			err := old.Renew(rctx, l)
			cancel()
			switch {
			case err == nil:
				t.Fatal("a leader cut off from its quorum renewed")
			case errors.Is(err, tenure.ErrLost):
				lost = true
			}
		}
		if _, err := old.Acquire(ctx, "k", c.ids[li], testHB); err == nil {
			t.Fatal("the minority side acquired")
		}
		ni := awaitLeader(t, c, 30*testHB, li, (li+1)%5)
		if g[ni] != 0 {
			t.Fatalf("leader %d is on the minority side", ni)
		}
		l2, err := c.node(ni).Acquire(ctx, "k", c.ids[ni], testHB)
		if err != nil {
			t.Fatal(err)
		}
		if l2.Term <= l.Term {
			t.Fatalf("term went from %d to %d", l.Term, l2.Term)
		}
		c.heal()
		if got := awaitLeader(t, c, 30*testHB); got != ni {
			// A re-election after healing is allowed, but never back to the old term.
			if c.node(got).Raft().CurrentTerm() <= l2.Term {
				t.Fatalf("leader %d after healing in term %d ≤ %d", got, c.node(got).Raft().CurrentTerm(), l2.Term)
			}
		}
		if err := old.Renew(ctx, l); !errors.Is(err, tenure.ErrLost) {
			t.Fatalf("old lease after healing: got %v, want ErrLost", err)
		}
	})
}

// Terms are durable: after every member crashed and restarted, the next
// grant's term is above every earlier one.
func TestRestartKeepsTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, testHB)
		ctx := context.Background()
		var last uint64
		for round := range 3 {
			li := awaitLeader(t, c, 30*testHB)
			l, err := c.node(li).Acquire(ctx, "k", c.ids[li], testHB)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if l.Term <= last {
				t.Fatalf("round %d: term %d not above %d", round, l.Term, last)
			}
			last = l.Term
			for i := range c.ids {
				c.crash(i)
			}
			for i := range c.ids {
				c.start(i)
				if got := c.node(i).Raft().CurrentTerm(); got < last && i == li {
					t.Fatalf("member %d restarted in term %d, below its grant's %d", i, got, last)
				}
			}
		}
	})
}

func TestWatchReportsLeaderChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, testHB)
		li := awaitLeader(t, c, 20*testHB)
		oi := (li + 1) % 3
		ctx, cancel := context.WithCancel(context.Background())
		w, err := c.node(oi).Watch(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		if r := <-w; r.Holder != c.ids[li] || r.Key != "k" {
			t.Fatalf("first delivery %+v, want holder %s", r, c.ids[li])
		}
		c.crash(li)
		var r tenure.Record
		for r = range w {
			if r.Holder != "" && r.Holder != c.ids[li] {
				break
			}
		}
		if r.Holder == "" || r.Holder == c.ids[li] {
			t.Fatalf("watch ended without reporting a new leader: %+v", r)
		}
		cancel()
		for range w { // must be closed once ctx is done
		}
		// Closing the node ends its watches too.
		w2, err := c.node(oi).Watch(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		c.crash(oi)
		for range w2 {
		}
	})
}

func TestConfigValidation(t *testing.T) {
	ms := []Member{{"a", "127.0.0.1:1"}, {"b", "127.0.0.1:2"}, {"c", "127.0.0.1:3"}}
	secret := []byte("0123456789abcdef-the-secret")
	cases := map[string]Config{
		"no ID":           {Members: ms, Dir: "d", Secret: secret},
		"ID not a member": {ID: "z", Members: ms, Dir: "d", Secret: secret},
		"two members":     {ID: "a", Members: ms[:2], Dir: "d", Secret: secret},
		"duplicate ID":    {ID: "a", Members: append(ms[:2:2], Member{"a", "127.0.0.1:4"}), Dir: "d", Secret: secret},
		"bad address":     {ID: "a", Members: append(ms[:2:2], Member{"c", "nowhere"}), Dir: "d", Secret: secret},
		"no dir":          {ID: "a", Members: ms, Secret: secret},
		"short secret":    {ID: "a", Members: ms, Dir: "d", Secret: secret[:8]},
		"election < hb":   {ID: "a", Members: ms, Dir: "d", Secret: secret, HeartbeatTimeout: time.Second, ElectionTimeout: time.Millisecond * 500},
		"lease > hb":      {ID: "a", Members: ms, Dir: "d", Secret: secret, HeartbeatTimeout: time.Second, LeaderLeaseTimeout: 2 * time.Second},
		"bad key":         {ID: "a", Members: ms, Dir: "d", Secret: secret, Key: "a\nb"},
		"some stores":     {ID: "a", Members: ms, Secret: secret, LogStore: hraft.NewInmemStore()},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(cfg)
			if !errors.Is(err, tenure.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if len(cfg.Secret) > 0 && strings.Contains(err.Error(), string(cfg.Secret)) {
				t.Fatalf("error quotes the secret: %v", err)
			}
		})
	}
}

// A leader whose Release could not hand leadership over (it is cut off)
// grants nothing more in the same term.
func TestNoSecondGrantInATerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, testHB)
		ctx := context.Background()
		li, n, l := leaderLease(t, c)
		c.isolate(li)
		synctest.Wait()
		rctx, cancel := context.WithTimeout(ctx, testHB/20)
		if err := n.Release(rctx, l); err == nil {
			t.Log("Release reported a handover although cut off") // raft may answer before the timeout; the grant is ended either way
		}
		cancel()
		_, err := n.Acquire(ctx, "k", c.ids[li], testHB)
		switch {
		case err == nil:
			t.Fatal("granted the key twice")
		case n.Raft().State() == hraft.Leader && n.Raft().CurrentTerm() == l.Term && !errors.Is(err, ErrSteppingDown):
			t.Fatalf("still leader of term %d: got %v, want ErrSteppingDown", l.Term, err)
		}
		t.Logf("second Acquire: %v", err)
		if err := n.Renew(ctx, l); !errors.Is(err, tenure.ErrLost) {
			t.Fatalf("Renew after Release: got %v, want ErrLost", err)
		}
	})
}

// leaderLease waits for c's leader and acquires "k" on it.
func leaderLease(t *testing.T, c *cluster) (int, *Node, tenure.Lease) {
	t.Helper()
	li := awaitLeader(t, c, 20*testHB)
	n := c.node(li)
	l, err := n.Acquire(context.Background(), "k", c.ids[li], testHB)
	if err != nil {
		t.Fatal(err)
	}
	return li, n, l
}
