package simtest

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/sim"
)

// Order is what the priority simulation expects of an algorithm.
type Order struct {
	// HighIDs: among members of equal priority the higher ID ranks first
	// (bully, ring), else the lower (lowest); see [peer.Outranks].
	HighIDs bool
	// Preempts: a member that ranks above a healthy coordinator takes over
	// by itself (lowest, bully without no-preempt); without it, only a
	// leader's Control.YieldAfter moves leadership to it.
	Preempts bool
	// NoPreempt: seeds may set peer.Config.NoPreempt (bully), which stops
	// the preemption.
	NoPreempt bool
}

// priorityYield is the electors' Control.YieldAfter in the seeds that set
// one.
const priorityYield = 500 * time.Millisecond

// RunPrioritySimulations is [RunSimulations] with priorities: each seed
// gives every member a random priority from 0 to 3 (in one seed of ten,
// all 0) to its node and its elector, and half of the seeds give the
// electors a Control.YieldAfter. Besides the invariants of the fault
// simulation (in a seed without partitions no two tasks at once), it fails
// if a member of priority 0 ever coordinates (checked every half
// heartbeat) or runs a task, and, once faults stop and every member is
// up, unless the highest-ranked member leads, lastingly, within the bound
// (when the algorithm preempts or the electors yield; otherwise any
// member of priority above 0 may), or, when every member has priority 0,
// if anybody leads. TENURE_PEER_SEED and TENURE_PEER_SEEDS work as there
// (default 400 seeds, 200 under the race detector, 40 with -short).
func RunPrioritySimulations(t *testing.T, alg, pkg string, ord Order) {
	seeds, err := seedList(400, 40)
	if err != nil {
		t.Fatal(err)
	}
	var tally tally
	passed := eachSeed(t, seeds, pkg, "TestPrioritySimulation", func(seed uint64) (string, error) {
		return simulatePriority(alg, seed, ord, &tally)
	})
	if !passed {
		return
	}
	t.Logf("%d seeds passed (%d without partitions, checked for overlap over %d leader tasks)", len(seeds), tally.checked, tally.tasks)
}

// prioritySeed is the random set-up of one priority seed.
type prioritySeed struct {
	n          int
	prios      map[uint64]int
	noPreempt  bool
	yield      time.Duration
	partitions bool
}

func newPrioritySeed(r *rand.Rand, ord Order) prioritySeed {
	s := prioritySeed{n: 3 + r.IntN(4), prios: map[uint64]int{}}
	allZero := r.IntN(10) == 0
	for id := 1; id <= s.n; id++ {
		if !allZero {
			s.prios[uint64(id)] = r.IntN(4)
		} else {
			s.prios[uint64(id)] = tenure.NeverLead
		}
	}
	s.noPreempt = ord.NoPreempt && r.IntN(3) == 0
	if r.IntN(2) == 0 {
		s.yield = priorityYield
	}
	s.partitions = r.IntN(2) == 0
	return s
}

// top is the member that ranks first among ids (sorted), 0 if all have
// priority 0: the highest priority, then the highest or lowest ID. It is
// written out here, not taken from peer.Outranks, so that a mistake there
// fails the simulation.
func top(ids []uint64, prios map[uint64]int, highIDs bool) uint64 {
	var best uint64
	for _, id := range ids {
		p := prios[id]
		switch {
		case p == tenure.NeverLead:
		case best == 0 || p > prios[best]:
			best = id
		case p == prios[best] && highIDs:
			best = id // ids ascend: a later one is higher
		}
	}
	return best
}

// simulatePriority runs one priority seed (see RunPrioritySimulations).
func simulatePriority(alg string, seed uint64, ord Order, tally *tally) (desc string, err error) {
	r := rand.New(rand.NewPCG(seed, 0x9e1))
	ps := newPrioritySeed(r, ord)
	c := New(Options{Algorithm: alg, Size: ps.n, Seed: seed, NoPreempt: ps.noPreempt, Electors: true,
		Priorities: ps.prios, YieldAfter: ps.yield})
	s := &seedRun{c: c, r: r, ids: c.Group.IDs(), partitions: ps.partitions}
	s.first = top(s.ids, ps.prios, ord.HighIDs)
	if s.first == 0 {
		s.first = s.ids[0]
	}
	desc = fmt.Sprintf("n=%d priorities=%v no-preempt=%t yield-after=%s partitions=%t", ps.n, ps.prios, ps.noPreempt, ps.yield, ps.partitions)
	defer func() {
		c.Close()
		if err == nil {
			err = neverLeadTasks(c.Hist, ps.prios)
		}
		if err == nil {
			err = s.checkOverlaps(tally)
		}
	}()
	if err := c.StartAll(); err != nil {
		return desc, err
	}
	if err := s.firstElection(ps.prios, ord); err != nil {
		return desc, fmt.Errorf("all members started at once: %w", err)
	}
	if err := s.faultPhase(3 * time.Second); err != nil {
		return desc, err
	}
	// Faults stopped; every member is up.
	if err := c.StartAll(); err != nil {
		return desc, err
	}
	best := top(s.ids, ps.prios, ord.HighIDs)
	bound := Bound(ps.n, c.heartbeat, c.timeout)
	if best == 0 {
		return desc, s.nobodyLeads(bound)
	}
	accept, want := func(l uint64) bool { return l == best }, strconv.FormatUint(best, 10)
	switch {
	case ord.Preempts && !ps.noPreempt:
	case ps.yield > 0:
		// A leader yields to a higher priority only, so any member of the
		// highest priority may lead. It re-reads the candidates about
		// once per TTL (3 timeouts), yields after YieldAfter, and the
		// hand-over takes an election.
		accept = func(l uint64) bool { return ps.prios[l] == ps.prios[best] }
		want = fmt.Sprintf("any of priority %d", ps.prios[best])
		bound += ps.yield + 6*c.timeout
	default:
		// Any member of priority above 0 (Check fails on the others).
		accept, want = func(uint64) bool { return true }, "any of priority above 0"
	}
	_, err = s.settle(accept, func() string { return want }, bound)
	return desc, err
}

// firstElection checks that when all members start together, on a
// network without faults, the first in the order leads (lastingly).
func (s *seedRun) firstElection(prios map[uint64]int, ord Order) error {
	best := top(s.ids, prios, ord.HighIDs)
	if best == 0 {
		return nil // checked at the end
	}
	_, err := s.settle(func(l uint64) bool { return l == best }, func() string { return strconv.FormatUint(best, 10) },
		Bound(len(s.ids), s.c.heartbeat, s.c.timeout))
	return err
}

// nobodyLeads checks, when every member has priority 0, that no member
// follows a coordinator and no task runs during bound.
func (s *seedRun) nobodyLeads(bound time.Duration) error {
	stop := time.Now().Add(bound)
	for time.Now().Before(stop) {
		if err := s.c.Check(); err != nil {
			return err
		}
		if l := s.c.Leading(); len(l) > 0 {
			return fmt.Errorf("members %v run a task, every member having priority 0", l)
		}
		time.Sleep(s.c.heartbeat / 2)
	}
	for _, id := range s.c.Live() {
		if st := s.c.Nodes[id].Status(); st.Leader != 0 {
			return fmt.Errorf("member %d follows %d, every member having priority 0:\n%s", id, st.Leader, s.c.Describe())
		}
	}
	return nil
}

// neverLeadTasks fails if a member of priority 0 ever ran a leader task.
func neverLeadTasks(h *sim.History, prios map[uint64]int) error {
	for _, l := range h.Leaderships {
		id, _ := strconv.ParseUint(l.ID, 10, 64)
		if p, ok := prios[id]; ok && p == tenure.NeverLead {
			return fmt.Errorf("member %d, of priority 0, ran a leader task of term %d", id, l.Term)
		}
	}
	return nil
}
