package raft

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
)

// The simulation runs a cluster under a seeded schedule of partitions,
// crashes and restarts, in virtual time (testing/synctest), while every
// member tries to acquire and renew the key. It then checks:
//
//   - never two members granted or renewed in the same term;
//   - no grant or renewal succeeded on a member that was on a minority side
//     (or crashed) for the whole call;
//   - grants that do not overlap in time have growing terms, and no member's
//     raft term ever goes back, across restarts too;
//   - once everything heals, a leader is granted the key within the bound.
//
// The seed fixes the schedule; raft's own timer jitter and goroutine
// interleavings are not seeded, so a failing seed reproduces its schedule,
// usually its failure. Run one seed with
//
//	TENURE_RAFT_SEED=N go test ./peer/raft -run TestSimulation -v
//
// and another number of seeds with TENURE_RAFT_SEEDS=N (default 2000, or
// 300 under the race detector; a tenth of that with -short).

const simHB = 100 * time.Millisecond

// healBound is how long after the final heal a grant must have happened:
// a few election rounds (each up to 2×HeartbeatTimeout, randomised) plus a
// pre-vote and vote round.
const healBound = 40 * simHB

func TestSimulation(t *testing.T) {
	var seeds []uint64
	if s := os.Getenv("TENURE_RAFT_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("TENURE_RAFT_SEED=%q: %v", s, err)
		}
		seeds = []uint64{seed}
	} else {
		n := defaultSeeds
		if testing.Short() {
			n /= 10
		}
		if s := os.Getenv("TENURE_RAFT_SEEDS"); s != "" {
			var err error
			if n, err = strconv.Atoi(s); err != nil {
				t.Fatalf("TENURE_RAFT_SEEDS=%q: %v", s, err)
			}
		}
		base := uint64(time.Now().UnixNano()) // fresh seeds each run; failures name theirs
		for i := range n {
			seeds = append(seeds, base+uint64(i))
		}
	}
	start := time.Now()
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { simulate(t, seed) })
			if t.Failed() {
				t.Logf("reproduce with: TENURE_RAFT_SEED=%d go test ./peer/raft -run TestSimulation -v", seed)
			}
		})
	}
	t.Logf("%d seeds in %s", len(seeds), time.Since(start).Round(time.Millisecond))
}

// simEvent is one successful Acquire or Renew.
type simEvent struct {
	node       int
	acquire    bool
	term       uint64
	start, end time.Time
}

// topology is the cluster's shape from a moment on.
type topology struct {
	at       time.Time
	majority []bool // per member: running on a majority side
}

type simLog struct {
	mu     sync.Mutex
	events []simEvent
	topo   []topology
	errs   []string
}

func (s *simLog) errorf(format string, args ...any) {
	s.mu.Lock()
	s.errs = append(s.errs, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *simLog) snapshot(c *cluster) {
	tp := topology{at: time.Now()}
	for i := range c.ids {
		tp.majority = append(tp.majority, c.majority(i))
	}
	s.mu.Lock()
	s.topo = append(s.topo, tp)
	s.mu.Unlock()
}

// majorityDuring reports whether member i was on a majority side at some
// moment of [from, to].
func (s *simLog) majorityDuring(i int, from, to time.Time) bool {
	for k, tp := range s.topo {
		end := to.Add(time.Hour)
		if k+1 < len(s.topo) {
			end = s.topo[k+1].at
		}
		if !tp.at.After(to) && !end.Before(from) && tp.majority[i] {
			return true
		}
	}
	return false
}

func simulate(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	n := []int{3, 5, 5, 7}[rng.IntN(4)]
	c := newCluster(t, n, simHB)
	log := &simLog{}
	log.snapshot(c)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { drive(ctx, c, i, log) })
	}

	// The fault schedule.
	crashed := make([]bool, n)
	steps := 4 + rng.IntN(8)
	for range steps {
		time.Sleep(time.Duration(2+rng.IntN(20)) * simHB / 2)
		switch k := rng.IntN(10); {
		case k < 4: // partition: a random minority, often holding the leader
			g := make([]int, n)
			for i := range n {
				g[i] = rng.IntN(2)
			}
			if ls := c.leaders(); len(ls) > 0 && rng.IntN(2) == 0 {
				g[ls[0]] = 1
			}
			c.partition(g)
		case k < 6: // crash one
			i := rng.IntN(n)
			if !crashed[i] {
				crashed[i] = true
				c.crash(i)
			}
		case k < 8: // restart one
			i := rng.IntN(n)
			if crashed[i] {
				crashed[i] = false
				c.start(i)
			}
		default:
			c.heal()
		}
		log.snapshot(c)
	}
	for i := range n {
		if crashed[i] {
			c.start(i)
		}
	}
	c.heal()
	healed := time.Now()
	log.snapshot(c)

	// Liveness: someone is granted the key within the bound.
	deadline := time.After(healBound)
	granted := false
	for !granted {
		select {
		case <-deadline:
			t.Errorf("no grant within %s after healing (raft leaders %v)", healBound, c.leaders())
			granted = true
		case <-time.After(simHB / 4):
			log.mu.Lock()
			for _, e := range log.events {
				if !e.start.Before(healed) {
					granted = true
				}
			}
			log.mu.Unlock()
		}
	}
	stop()
	wg.Wait()
	c.close()
	check(t, log, n)
}

// drive is one member's candidate loop: acquire when not holding, renew
// when holding, a few times per heartbeat timeout.
func drive(ctx context.Context, c *cluster, i int, log *simLog) {
	var lease *tenure.Lease
	var lastTerm uint64
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(simHB / 4):
		}
		n := c.node(i)
		if n == nil {
			lease = nil
			continue
		}
		if term := n.Raft().CurrentTerm(); term < lastTerm {
			log.errorf("member %d: raft term went back from %d to %d", i, lastTerm, term)
		} else {
			lastTerm = term
		}
		rctx, cancel := context.WithTimeout(ctx, simHB/2)
		start := time.Now()
		if lease == nil {
			l, err := n.Acquire(rctx, "k", c.ids[i], simHB)
			if err == nil {
				lease = &l
				log.mu.Lock()
				log.events = append(log.events, simEvent{node: i, acquire: true, term: l.Term, start: start, end: time.Now()})
				log.mu.Unlock()
			} else if errors.Is(err, tenure.ErrInvalid) {
				log.errorf("member %d: Acquire: %v", i, err)
			}
		} else {
			err := n.Renew(rctx, *lease)
			switch {
			case err == nil:
				log.mu.Lock()
				log.events = append(log.events, simEvent{node: i, term: lease.Term, start: start, end: time.Now()})
				log.mu.Unlock()
			case errors.Is(err, tenure.ErrLost), errors.Is(err, tenure.ErrClosed):
				lease = nil
			}
		}
		cancel()
	}
}

func check(t *testing.T, log *simLog, n int) {
	for _, e := range log.errs {
		t.Error(e)
	}
	byTerm := map[uint64]int{}
	var acquires []simEvent
	for _, e := range log.events {
		if who, ok := byTerm[e.term]; ok && who != e.node {
			t.Errorf("two leaders in term %d: members %d and %d", e.term, who, e.node)
		}
		byTerm[e.term] = e.node
		if !log.majorityDuring(e.node, e.start, e.end) {
			t.Errorf("member %d succeeded (acquire=%t, term %d, %s..%s) while on a minority side",
				e.node, e.acquire, e.term, e.start.Format(time.StampMilli), e.end.Format(time.StampMilli))
		}
		if e.acquire {
			acquires = append(acquires, e)
		}
	}
	for i, a := range acquires {
		for _, b := range acquires[i+1:] {
			if a.end.Before(b.start) && b.term <= a.term {
				t.Errorf("grant in term %d (member %d) after grant in term %d (member %d): terms went back",
					b.term, b.node, a.term, a.node)
			}
		}
	}
	if len(acquires) == 0 {
		t.Errorf("no grant at all among %d members", n)
	}
}
