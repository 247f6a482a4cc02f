package shard_test

import (
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/shard"
)

// seeds is how many seeded schedules TestSeeds runs (8 with -race or
// -short); TENURE_SHARD_SEEDS=N runs N, and TENURE_SHARD_SEED=N runs
// schedule N alone.
const seeds = 40

// TestSeeds runs seeded schedules of joins, graceful leaves and crashes,
// some of them before the group settled from the previous change, with
// tasks that are slow to stop and, in a third of them, a member that
// cannot take one key (so the fallback rule acts), and
// checks after each schedule that no key ever had two leaders at once and
// that the group settles on the owners of its final live set. A failure
// names its seed; TENURE_SHARD_SEED=N go test ./shard -run TestSeeds -v
// replays its schedule (the interleaving within one virtual instant may
// differ).
func TestSeeds(t *testing.T) {
	simulation(t)
	first, n := uint64(1), uint64(seeds)
	if s := os.Getenv("TENURE_SHARD_SEEDS"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TENURE_SHARD_SEEDS=%q: %v", s, err)
		}
		n = v
	}
	if s := os.Getenv("TENURE_SHARD_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TENURE_SHARD_SEED=%q: %v", s, err)
		}
		first, n = v, 1
	}
	if (testing.Short() || raceEnabled) && n == seeds {
		n = 8
	}
	defer func() { t.Logf("%d schedules; the fallback rule took a key %d times", n, fallbacks.Load()) }()
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
	// Even seeds lead through one session per member, odd ones per key.
	c.sessions = seed%2 == 0
	// Tasks take up to a fifth of the TTL to stop (the margin is a third):
	// a key's next leader must wait for them.
	c.stopDelay = time.Duration(rng.Int64N(int64(ttl / 5)))
	// In a third of the schedules one member cannot take one key until
	// the end, so the fallback rule is at work through the changes (and
	// the group is not expected to settle on owners until then).
	broken := &atomic.Bool{}
	if rng.IntN(3) == 0 {
		bad, key := members[rng.IntN(len(members))], strconv.Itoa(rng.IntN(24))
		broken.Store(true)
		c.wrap = func(id string, s tenure.Store) tenure.Store {
			if id != bad {
				return s
			}
			return refusing{s, "g/keys/" + key, broken}
		}
		t.Logf("%s cannot take key %s until the end", bad, key)
	}
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
		// With a broken member, gaps of up to 4 TTL give Takeover (2 TTL)
		// time to act.
		if gap := 2 * ttl; broken.Load() {
			time.Sleep(time.Duration(rng.Int64N(int64(2 * gap))))
		} else if rng.IntN(2) == 0 {
			time.Sleep(time.Duration(rng.Int64N(int64(gap))))
		} else {
			c.settle(c.now(), 5*ttl)
		}
	}
	if len(c.live()) == 0 {
		c.start(members[0])
	}
	broken.Store(false)
	// A key taken by the fallback rule goes back within Reclaim.
	c.settle(c.now(), 15*ttl)
	for _, id := range c.live() {
		c.stop(id)
	}
	c.check()
	fallbacks.Add(c.fallbacks.Load())
}

// fallbacks counts the fallback takeovers over all schedules of one run.
var fallbacks atomic.Int64

// simulation skips t under the race detector (see raceEnabled).
func simulation(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("cluster simulations run without -race (.ci/run does): Go 1.26's race runtime aborts in them (golang/go#78156)")
	}
}
