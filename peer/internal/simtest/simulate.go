package simtest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/sim"
	"github.com/tenurehq/tenure/peer/memnet"
)

// Expect returns the coordinator an algorithm must settle on among the live
// members, or 0 if any one will do.
type Expect func(live []uint64, noPreempt bool) uint64

// Highest and Lowest are the usual expectations; AnyLeader accepts any.
func Highest(live []uint64, noPreempt bool) uint64 {
	if noPreempt {
		return 0
	}
	return live[len(live)-1]
}

// Lowest expects the lowest live member.
func Lowest(live []uint64, _ bool) uint64 { return live[0] }

// AnyLeader accepts any coordinator.
func AnyLeader([]uint64, bool) uint64 { return 0 }

// Bound is the stated bound on reaching agreement once faults stop, for a
// group of n with the default timing: 4 timeouts (suspicion, abstention,
// start-up wait, a lost round) plus 6 heartbeats per member (a ring round
// skipping dead members, each after an ack wait of two heartbeats).
func Bound(n int, heartbeat, timeout time.Duration) time.Duration {
	return 4*timeout + time.Duration(6*n)*heartbeat
}

// RunSimulations runs the fault simulation for many seeds, each in its own
// synctest bubble. Each seed is a scenario over memnet in virtual time,
// every member running a real tenure.Elector: crashes and recoveries (of
// any member, of the coordinator, of the member with precedence),
// partitions in half of the seeds, loss, duplication, delay and tasks that
// return (resignations). It fails if, in a seed without partitions, two
// members' leader tasks are ever live at the same instant or terms do not
// grow; if, once faults stop, the live members do not agree on one
// coordinator (the one expect names, if any) within [Bound]; if an epoch
// goes back on any member; or if an epoch is issued twice (so two
// coordinators during a partition differ). TENURE_PEER_SEED=N replays one
// seed (TENURE_PEER_LOG=1 adds the nodes' and electors' logs),
// TENURE_PEER_SEEDS=K sets how many (default 3000, 1500 under the race
// detector, 100 with -short).
func RunSimulations(t *testing.T, alg, pkg string, expect Expect) {
	seeds, err := seedList(3000, 100)
	if err != nil {
		t.Fatal(err)
	}
	var tally tally
	var worst time.Duration
	var worstSeed uint64
	passed := eachSeed(t, seeds, pkg, "TestSimulation", func(seed uint64) (string, error) {
		took, desc, err := simulate(alg, seed, expect, &tally)
		if err == nil && took > worst {
			worst, worstSeed = took, seed
		}
		return desc, err
	})
	if !passed {
		return
	}
	t.Logf("%d seeds passed (%d without partitions, checked for overlap over %d leader tasks); slowest agreement after faults stopped: %s (seed %d)",
		len(seeds), tally.checked, tally.tasks, worst, worstSeed)
}

// tally counts what the overlap check covered.
type tally struct{ checked, tasks int }

// simulate runs one seed: random crashes and restarts (of any member, of
// the coordinator, of the member with precedence), partitions (in half of
// the seeds), losses, duplicates, delays and resignations (a leader task
// that returns) for a few seconds, then a healed network, and checks the
// invariants throughout and agreement at the end. Every member runs a real
// elector; in a seed without partitions, no two members' tasks may be
// live at the same instant and terms must grow (sim.Overlaps).
func simulate(alg string, seed uint64, expect Expect, tally *tally) (took time.Duration, desc string, err error) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	n := 3 + r.IntN(5)
	noPreempt := r.IntN(3) == 0
	partitions := r.IntN(2) == 0
	c := New(Options{Algorithm: alg, Size: n, Seed: seed, NoPreempt: noPreempt, Electors: true})
	s := &seedRun{c: c, r: r, ids: c.Group.IDs(), partitions: partitions}
	defer func() {
		c.Close()
		if err == nil {
			err = s.checkOverlaps(tally)
		}
	}()
	// The member with precedence: the one the algorithm prefers.
	if s.first = expect(s.ids, false); s.first == 0 {
		s.first = s.ids[len(s.ids)-1]
	}
	desc = fmt.Sprintf("n=%d no-preempt=%t partitions=%t", n, noPreempt, partitions)
	if err := c.StartAll(); err != nil {
		return 0, desc, err
	}
	if err := s.faultPhase(4 * time.Second); err != nil {
		return 0, desc, err
	}
	want := func() uint64 { return expect(c.Live(), noPreempt) }
	took, err = s.settle(func(l uint64) bool { w := want(); return w == 0 || w == l },
		func() string { return strconv.FormatUint(want(), 10) }, Bound(n, c.heartbeat, c.timeout))
	return took, desc, err
}

// seedRun is the state of one seed's simulation.
type seedRun struct {
	c           *Cluster
	r           *rand.Rand
	ids         []uint64
	first       uint64 // the member with precedence
	partitions  bool   // whether this seed may partition the network
	partitioned bool   // whether it did
}

// faultPhase injects random faults for 2s and a random part of extra,
// letting time pass between them, then stops them: it heals the network
// and keeps delays within the synchrony bound.
func (s *seedRun) faultPhase(extra time.Duration) error {
	end := time.Now().Add(2*time.Second + time.Duration(s.r.Int64N(int64(extra))))
	for time.Now().Before(end) {
		// Odd nanoseconds keep fault times apart from timer ticks.
		if err := s.step(time.Duration(100+s.r.IntN(500))*time.Millisecond + time.Duration(s.r.IntN(1000)+1)); err != nil {
			return err
		}
		if err := s.fault(); err != nil {
			return err
		}
	}
	s.c.Net.Heal()
	s.c.Net.SetFaults(memnet.Faults{MaxDelay: 20 * time.Millisecond})
	return nil
}

// checkOverlaps is what a seed that injected no partition checks at its
// end: no two members' tasks live at the same instant, terms growing
// (sim.Overlaps). It counts what it checked in tally.
func (s *seedRun) checkOverlaps(tally *tally) error {
	if s.partitioned {
		return nil
	}
	h := s.c.Hist
	tally.checked++
	tally.tasks += len(h.Leaderships)
	if v := sim.Overlaps(h); len(v) > 0 {
		return fmt.Errorf("no partition was injected, yet: %s\nhistory:\n%s", strings.Join(v, "; "), h)
	}
	return nil
}

// step lets d pass, checking the invariants every half heartbeat.
func (s *seedRun) step(d time.Duration) error {
	stop := time.Now().Add(d)
	for time.Now().Before(stop) {
		time.Sleep(min(s.c.heartbeat/2, time.Until(stop)))
		if err := s.c.Check(); err != nil {
			return err
		}
	}
	return nil
}

// fault injects one random fault, or ends one.
func (s *seedRun) fault() error {
	c, r := s.c, s.r
	id := s.ids[r.IntN(len(s.ids))]
	switch r.IntN(8) {
	case 0:
		if len(c.Live()) > 1 {
			c.Crash(id)
		}
	case 1:
		return c.Start(id)
	case 2:
		if !s.partitions {
			return nil
		}
		s.partitioned = true
		var a, b []uint64
		for _, id := range s.ids {
			if r.IntN(2) == 0 {
				a = append(a, id)
			} else {
				b = append(b, id)
			}
		}
		c.Net.Partition(a, b)
	case 3:
		c.Net.Heal()
	case 4:
		c.Net.SetFaults(randomFaults(r))
	case 5:
		resign(c)
	case 6:
		if l, _, ok := c.Agreed(); ok && len(c.Live()) > 1 {
			c.Crash(l)
		}
	case 7:
		// The member with precedence crashes, or recovers.
		if c.Nodes[s.first] != nil && len(c.Live()) > 1 {
			c.Crash(s.first)
		} else {
			return c.Start(s.first)
		}
	}
	return nil
}

// settle waits, once faults stopped, for agreement on a coordinator
// accept takes (want describes which), reached within bound and then
// lasting (unchanged) for two timeouts, and returns how long it took to
// reach.
func (s *seedRun) settle(accept func(leader uint64) bool, want func() string, bound time.Duration) (time.Duration, error) {
	c := s.c
	stopped := time.Now()
	hold := 2 * c.timeout
	var since time.Time // when the current agreement began, zero if none
	var leader, epoch uint64
	for {
		if err := c.Check(); err != nil {
			return 0, err
		}
		l, e, ok := c.Agreed()
		if ok && !accept(l) {
			ok = false
		}
		switch {
		case !ok:
			since = time.Time{}
		case since.IsZero() || l != leader || e != epoch:
			since, leader, epoch = time.Now(), l, e
		case time.Since(since) >= hold:
			return since.Sub(stopped), nil
		}
		if (since.IsZero() && time.Since(stopped) > bound) || since.Sub(stopped) > bound {
			return 0, fmt.Errorf("no lasting agreement on the expected coordinator (%s) within %s after faults stopped:\n%s",
				want(), bound, c.Describe())
		}
		time.Sleep(c.heartbeat / 4)
	}
}

// resign makes the running leader task, if any, return: its elector
// releases the lease (the coordinator resigns) and campaigns again.
func resign(c *Cluster) {
	for _, id := range c.Live() {
		c.Finish(id)
	}
}

func randomFaults(r *rand.Rand) memnet.Faults {
	return memnet.Faults{
		Drop:      r.Float64() * 0.3,
		Duplicate: r.Float64() * 0.2,
		MaxDelay:  time.Duration(r.Int64N(int64(150 * time.Millisecond))),
	}
}
