//go:build linux

package shard_test

import (
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/local"
)

// The same joins, leave and crash on the local store, in real time, each
// member with its own handle on one state directory as separate processes
// would have: no overlap per key, and each change settles.
func TestLocalStore(t *testing.T) { testLocalStore(t, false) }

// TestLocalStoreSessions is TestLocalStore with each member leading
// through one tenure.Session of its handle.
func TestLocalStoreSessions(t *testing.T) { testLocalStore(t, true) }

func testLocalStore(t *testing.T, sessions bool) {
	if testing.Short() {
		t.Skip("real time: a few seconds")
	}
	dir := t.TempDir()
	ttl := time.Second
	members := ids(3)
	c := newCluster(t, members, shard.Numbered(16), ttl)
	c.sessions = sessions
	c.openStore = func() tenure.Store {
		s, err := local.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	for _, id := range members {
		before, at := c.leaders(), c.now()
		c.start(id)
		took := c.settle(at, 5*ttl)
		lo, hi := c.balance()
		t.Logf("join %s: balance min %d max %d, moved %d, rebalanced in %s", id, lo, hi, moved(before, c.leaders()), took)
	}
	before, at := c.leaders(), c.now()
	c.stop("m0")
	took := c.settle(at, 5*ttl)
	t.Logf("leave m0: moved %d, rebalanced in %s", moved(before, c.leaders()), took)
	before, at = c.leaders(), c.now()
	c.crash("m1")
	took = c.settle(at, 5*ttl)
	t.Logf("crash m1: moved %d, rebalanced in %s", moved(before, c.leaders()), took)
	for _, id := range c.live() {
		c.stop(id)
	}
	c.check()
}
