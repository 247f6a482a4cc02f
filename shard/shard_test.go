package shard_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/history"
	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/memory"
)

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i)
	}
	return out
}

// Members join one by one, then leave one by one, then one crashes: after
// each change every key is led by its owner, each member leads about K/n
// keys, only the keys whose owner changed moved, and no key ever had two
// leaders at once.
func TestJoinLeaveCrash(t *testing.T) {
	simulation(t)
	synctest.Test(t, func(t *testing.T) {
		const k = 64
		ttl := time.Second
		members := ids(4)
		c := newCluster(t, members, shard.Numbered(k), ttl)
		c.stopDelay = 100 * time.Millisecond // the next leader must wait for it
		for i, id := range members {
			before, at, handoffs := c.leaders(), c.now(), c.handoffs()
			c.start(id)
			took := c.settle(at, 5*ttl)
			lo, hi := c.balance()
			n := moved(before, c.leaders())
			t.Logf("join %s: n=%d, balance min %d max %d, moved %d (K/n = %d), rebalanced in %s",
				id, i+1, lo, hi, n, k/(i+1), took)
			if got := c.handoffs() - handoffs; got != uint64(n) {
				t.Errorf("join %s moved %d keys, but the members' Status counts %d handoffs", id, n, got)
			}
		}
		before, at := c.leaders(), c.now()
		c.stop("m1")
		took := c.settle(at, 5*ttl)
		lo, hi := c.balance()
		t.Logf("leave m1: balance min %d max %d, moved %d, rebalanced in %s", lo, hi, moved(before, c.leaders()), took)

		before, at = c.leaders(), c.now()
		c.crash("m2")
		took = c.settle(at, 5*ttl)
		lo, hi = c.balance()
		t.Logf("crash m2: balance min %d max %d, moved %d, rebalanced in %s", lo, hi, moved(before, c.leaders()), took)
		if took < ttl/2 || took > 2*ttl {
			t.Errorf("after a crash, keys were led again after %s; want about one TTL (%s)", took, ttl)
		}
		for _, id := range c.live() {
			c.stop(id)
		}
		c.check()
	})
}

// The harness catches what it is there to catch: members on two different
// stores (a split brain no lease can prevent) both lead every key, and the
// per-key overlap check reports it.
func TestHarnessCatchesOverlap(t *testing.T) {
	simulation(t)
	synctest.Test(t, func(t *testing.T) {
		ttl := time.Second
		c := newCluster(t, ids(2), shard.Numbered(4), ttl)
		other := memory.New(tenure.SystemClock)
		c.wrap = func(id string, s tenure.Store) tenure.Store {
			if id == "m1" {
				return other.Handle()
			}
			return s
		}
		c.start("m0")
		c.start("m1")
		time.Sleep(ttl)
		c.stop("m0")
		c.stop("m1")
		c.mu.Lock()
		defer c.mu.Unlock()
		overlaps := 0
		for _, ivs := range c.ivs {
			for _, v := range history.Check(ivs, c.now(), nil) {
				if v.Rule == history.RuleOverlap {
					overlaps++
				}
			}
		}
		if overlaps != 4 {
			t.Errorf("split brain over 4 keys: %d overlaps reported, want 4", overlaps)
		}
	})
}
