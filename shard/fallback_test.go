package shard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/shard"
)

// refusing fails every Acquire of one key while on is set, as a member
// that is live but cannot take that key would.
type refusing struct {
	tenure.Store
	key string
	on  *atomic.Bool
}

var errRefused = errors.New("test: acquire refused")

func (r refusing) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	if key == r.key && r.on.Load() {
		return tenure.Lease{}, errRefused
	}
	return r.Store.Acquire(ctx, key, id, ttl)
}

// A key whose live owner cannot take it is led by the runner-up after
// Takeover, and goes back to its owner, without overlap, once the owner
// can take it again, within Reclaim.
func TestFallbackLeadsAKeyItsOwnerLeftUnled(t *testing.T) {
	simulation(t)
	synctest.Test(t, func(t *testing.T) {
		ttl := time.Second
		members := ids(3)
		keys := shard.Numbered(8)
		var key, second string
		for _, k := range keys {
			if shard.Owner(k, keys, members) == "m0" {
				key = k
				break
			}
		}
		for _, m := range members {
			if shard.Rank(key, m, keys, members) == 1 {
				second = m
			}
		}
		broken := &atomic.Bool{}
		broken.Store(true)
		c := newCluster(t, members, keys, ttl)
		c.wrap = func(id string, s tenure.Store) tenure.Store {
			if id != "m0" {
				return s
			}
			return refusing{s, "g/keys/" + key, broken}
		}
		for _, id := range members {
			c.start(id)
		}
		start := c.now()
		for c.leaders()[key] == "" && c.now()-start < 10*ttl {
			time.Sleep(ttl / 50)
		}
		took := c.now() - start
		if got := c.leaders()[key]; got != second {
			t.Fatalf("key %s (owner m0, which cannot take it) is led by %q after %s, want the runner-up %s", key, got, took, second)
		}
		t.Logf("owner m0 cannot take key %s: runner-up %s leads it after %s (Takeover %s)", key, second, took, 2*ttl)
		if took < 2*ttl || took > 3*ttl {
			t.Errorf("runner-up took key %s after %s, want Takeover (%s) plus a little", key, took, 2*ttl)
		}

		broken.Store(false)
		healed := c.now()
		for c.leaders()[key] != "m0" && c.now()-healed < 15*ttl {
			time.Sleep(ttl / 50)
		}
		if got := c.leaders()[key]; got != "m0" {
			t.Fatalf("key %s is led by %q %s after its owner m0 could take it again", key, got, c.now()-healed)
		}
		t.Logf("owner m0 leads key %s again %s after it could (Reclaim %s)", key, c.now()-healed, 10*ttl)
		for _, id := range c.live() {
			c.stop(id)
		}
		c.check()
	})
}

// cutOff fails every request about one key while on is set: a member that
// can no longer renew its liveness lease, though its key leases still work.
type cutOff struct {
	tenure.Store
	key string
	on  *atomic.Bool
}

func (c cutOff) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	if key == c.key && c.on.Load() {
		return tenure.Lease{}, errRefused
	}
	return c.Store.Acquire(ctx, key, id, ttl)
}

func (c cutOff) Renew(ctx context.Context, l tenure.Lease) error {
	if l.Key == c.key && c.on.Load() {
		return errRefused
	}
	return c.Store.Renew(ctx, l)
}

// A member that loses its liveness lease while it runs gives up every key
// (the others take them over once its liveness grant expired), and takes
// its keys back once it is live again; no key ever has two leaders.
func TestMemberThatLosesItsLivenessGivesUpItsKeys(t *testing.T) {
	simulation(t)
	synctest.Test(t, func(t *testing.T) {
		ttl := time.Second
		members := ids(3)
		cut := &atomic.Bool{}
		c := newCluster(t, members, shard.Numbered(24), ttl)
		c.stopDelay = 50 * time.Millisecond
		c.wrap = func(id string, s tenure.Store) tenure.Store {
			if id != "m0" {
				return s
			}
			return cutOff{s, "g/members/m0", cut}
		}
		for _, id := range members {
			c.start(id)
		}
		c.settle(c.now(), 5*ttl)
		mine := 0
		for _, l := range c.leaders() {
			if l == "m0" {
				mine++
			}
		}

		cut.Store(true)
		at := c.now()
		deadline := at + 5*ttl
		for c.now() < deadline {
			st := c.status("m0")
			others := 0
			for _, l := range c.leaders() {
				if l != "m0" && l != "" {
					others++
				}
			}
			if len(st.Leading) == 0 && others == 24 {
				break
			}
			time.Sleep(ttl / 50)
		}
		if st := c.status("m0"); len(st.Leading) != 0 {
			t.Fatalf("m0 cannot renew its liveness, yet leads %v %s later", st.Leading, c.now()-at)
		}
		t.Logf("m0 cut off from its liveness key: its %d keys led by others %s later", mine, c.now()-at)

		cut.Store(false)
		at = c.now()
		took := c.settle(at, 5*ttl)
		t.Logf("m0 live again: keys back after %s", took)
		for _, id := range c.live() {
			c.stop(id)
		}
		c.check()
	})
}
