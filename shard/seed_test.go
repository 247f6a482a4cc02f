package shard_test

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure/shard"
)

// seeds is how many seeded schedules TestSeeds runs; TENURE_SHARD_SEED=N
// runs schedule N alone.
const seeds = 40

// TestSeeds runs seeded schedules of joins, graceful leaves and crashes,
// some of them before the group settled from the previous change, with
// tasks that are slow to stop, and
// checks after each schedule that no key ever had two leaders at once and
// that the group settles on the owners of its final live set. A failure
// names its seed; TENURE_SHARD_SEED=N go test ./shard -run TestSeeds -v
// replays its schedule (the interleaving within one virtual instant may
// differ).
func TestSeeds(t *testing.T) {
	first, n := uint64(1), uint64(seeds)
	if s := os.Getenv("TENURE_SHARD_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TENURE_SHARD_SEED=%q: %v", s, err)
		}
		first, n = v, 1
	}
	if (testing.Short() || raceEnabled) && n > 8 {
		n = 8
	}
	for seed := first; seed < first+n; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runSchedule(t, seed) })
			if t.Failed() {
				t.Logf("replay: TENURE_SHARD_SEED=%d go test ./shard -run TestSeeds -v", seed)
			}
		})
	}
}

func runSchedule(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 13))
	ttl := time.Second
	members := ids(5)
	c := newCluster(t, members, shard.Numbered(24), ttl)
	// Tasks take up to a fifth of the TTL to stop (the margin is a third):
	// a key's next leader must wait for them.
	c.stopDelay = time.Duration(rng.Int64N(int64(ttl / 5)))
	c.start(members[rng.IntN(len(members))])
	for range 8 {
		live := c.live()
		var down []string
		for _, m := range members {
			if !slices.Contains(live, m) {
				down = append(down, m)
			}
		}
		switch op := rng.IntN(3); {
		case len(down) > 0 && (op == 0 || len(live) <= 1):
			id := down[rng.IntN(len(down))]
			t.Logf("%s: join %s", c.now(), id)
			c.start(id)
		case op == 1:
			id := live[rng.IntN(len(live))]
			t.Logf("%s: leave %s", c.now(), id)
			c.stop(id)
		default:
			id := live[rng.IntN(len(live))]
			t.Logf("%s: crash %s", c.now(), id)
			c.crash(id)
		}
		// Half the time the next change comes before this one settled.
		if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(2 * ttl))))
		} else {
			c.settle(c.now(), 5*ttl)
		}
	}
	if len(c.live()) == 0 {
		c.start(members[0])
	}
	c.settle(c.now(), 5*ttl)
	for _, id := range c.live() {
		c.stop(id)
	}
	c.check()
}
