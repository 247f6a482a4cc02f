// Package simtest runs groups of peer nodes over memnet for the algorithm
// packages' simulations, tests and benchmarks. It is meant to run inside a
// testing/synctest bubble, where time is virtual.
package simtest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/sim"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/memnet"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// Cluster is a group of nodes on one memnet network. Not safe for concurrent
// use (the test's goroutine drives it).
type Cluster struct {
	Net    *memnet.Network
	Group  transport.Group
	Nodes  map[uint64]*peer.Node // nil while crashed
	Epochs map[uint64]*peer.MemEpoch
	// Configure, if set, adjusts each node's config before it starts.
	Configure func(c *peer.Config)
	// Hist records every leader task's lifetime when the cluster runs
	// electors (Options.Electors); nil otherwise.
	Hist *sim.History

	seed     uint64
	electors map[uint64]*member // by member ID, while it runs
	control  bool
	prios    map[uint64]int // Options.Priorities
	yield    time.Duration  // Options.YieldAfter

	alg       string
	heartbeat time.Duration
	timeout   time.Duration
	noPreempt bool

	lastEpoch  map[uint64]uint64 // highest Status.Epoch seen per node
	lastFollow map[uint64]uint64 // highest leader epoch followed per node
	issuedBy   map[uint64]uint64 // epoch -> the member that issued it
	issuedSeen map[uint64]int    // how many of a node's Issued were checked
}

// Options of a cluster.
type Options struct {
	Algorithm          string
	Size               int
	Seed               uint64
	Heartbeat, Timeout time.Duration
	NoPreempt          bool
	Configure          func(c *peer.Config)
	// Control gives the electors leadership control
	// ([tenure.Config.Control], the default priority), so that they obey
	// step-down requests (see [peer.Node.RequestStepDown]).
	Control bool
	// Priorities, if set, gives each member its priority (its node's
	// peer.Config.Priority and, with Electors, its elector's
	// Control.Priority, as `tenure run --priority` does); [Cluster.Check]
	// then also fails if a member of priority 0 ever coordinates.
	Priorities map[uint64]int
	// YieldAfter is the electors' Control.YieldAfter when Priorities is
	// set.
	YieldAfter time.Duration
	// Electors runs a real [tenure.Elector] on every started member, with
	// the node as its store and a task that records its lifetime in
	// Cluster.Hist: live from when the elector starts it until its context
	// is done, it returns (see [Cluster.Finish]) or its member crashes.
	Electors bool
}

// member is one running elector and its task's state.
type member struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	finish chan struct{} // a value makes the live task return

	mu   sync.Mutex
	live *sim.Leadership // the task's leadership while it runs
}

// New makes a cluster of members 1..Size without starting them.
func New(o Options) *Cluster {
	var ms []transport.Member
	for i := 1; i <= o.Size; i++ {
		ms = append(ms, transport.Member{ID: uint64(i)})
	}
	g, err := transport.NewGroup(ms)
	if err != nil {
		panic(err)
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 100 * time.Millisecond
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * o.Heartbeat
	}
	c := &Cluster{Net: memnet.New(o.Seed), Group: g, Nodes: map[uint64]*peer.Node{},
		Epochs: map[uint64]*peer.MemEpoch{}, Configure: o.Configure, alg: o.Algorithm,
		heartbeat: o.Heartbeat, timeout: o.Timeout, noPreempt: o.NoPreempt,
		lastEpoch: map[uint64]uint64{}, lastFollow: map[uint64]uint64{},
		issuedBy: map[uint64]uint64{}, issuedSeen: map[uint64]int{}, seed: o.Seed, control: o.Control,
		prios: o.Priorities, yield: o.YieldAfter}
	if o.Electors {
		c.Hist, c.electors = sim.NewHistory(), map[uint64]*member{}
	}
	for _, id := range g.IDs() {
		c.Epochs[id] = &peer.MemEpoch{}
	}
	return c
}

// StartAll starts every member.
func (c *Cluster) StartAll() error {
	for _, id := range c.Group.IDs() {
		if err := c.Start(id); err != nil {
			return err
		}
	}
	return nil
}

var logger = newLogger()

// newLogger discards logs unless TENURE_PEER_LOG is set (replays).
func newLogger() *slog.Logger {
	if os.Getenv("TENURE_PEER_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Start starts (or restarts) member id with its persisted epoch.
func (c *Cluster) Start(id uint64) error {
	if c.Nodes[id] != nil {
		return nil
	}
	cfg := peer.Config{ID: id, Group: c.Group, Algorithm: c.alg, Heartbeat: c.heartbeat, Timeout: c.timeout,
		NoPreempt: c.noPreempt, Transport: c.Net.Join(id), Epochs: c.Epochs[id],
		Logger: logger}
	if p, ok := c.prios[id]; ok {
		cfg.Priority = &p
	}
	if c.Configure != nil {
		c.Configure(&cfg)
	}
	s, err := peer.Open(context.Background(), cfg)
	if err != nil {
		return err
	}
	n := s.(*peer.Node)
	c.Nodes[id] = n
	c.issuedSeen[id] = 0
	if c.Hist != nil {
		return c.startElector(id, n)
	}
	return nil
}

// startElector runs an elector for member id over its node.
func (c *Cluster) startElector(id uint64, n *peer.Node) error {
	cfg := tenure.Config{Store: n, Key: "sim", Logger: logger, Rand: rand.New(rand.NewPCG(c.seed, id))}
	switch p, ok := c.prios[id]; {
	case ok:
		cfg.Control = &tenure.Control{Priority: p, YieldAfter: c.yield}
	case c.control || c.prios != nil:
		cfg.Control = &tenure.Control{Priority: tenure.DefaultPriority, YieldAfter: c.yield}
	}
	e, err := tenure.New(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{cancel: cancel, done: make(chan struct{}), finish: make(chan struct{}, 1)}
	c.electors[id] = m
	who := strconv.FormatUint(id, 10)
	go func() {
		defer close(m.done)
		e.Run(ctx, func(ctx context.Context) error {
			lease, _ := tenure.LeaseFrom(ctx)
			l := c.Hist.Started(who, lease.Term)
			m.mu.Lock()
			m.live = l
			m.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-m.finish:
				c.Hist.Note(who, lease.Term, "task returns")
			}
			c.Hist.Ended(l)
			m.mu.Lock()
			m.live = nil
			m.mu.Unlock()
			return nil
		})
	}()
	return nil
}

// Finish makes member id's leader task return, if one runs (a task that
// finished its work: the elector releases and campaigns again). It reports
// whether one ran.
func (c *Cluster) Finish(id uint64) bool {
	m := c.electors[id]
	if m == nil {
		return false
	}
	m.mu.Lock()
	live := m.live != nil
	m.mu.Unlock()
	if live {
		select {
		case m.finish <- struct{}{}:
		default:
		}
	}
	return live
}

// Leading returns the members whose leader task runs now, sorted (one
// at most, unless tasks overlap).
func (c *Cluster) Leading() []uint64 {
	var ids []uint64
	for id, m := range c.electors {
		m.mu.Lock()
		if m.live != nil {
			ids = append(ids, id)
		}
		m.mu.Unlock()
	}
	slices.Sort(ids)
	return ids
}

// Crash stops member id abruptly (no resignation): with electors, its
// task ends at this instant, as if the process died.
func (c *Cluster) Crash(id uint64) {
	if m := c.electors[id]; m != nil {
		m.mu.Lock()
		if m.live != nil {
			c.Hist.Note(strconv.FormatUint(id, 10), m.live.Term, "crashes")
			c.Hist.Ended(m.live)
		}
		m.mu.Unlock()
	}
	if n := c.Nodes[id]; n != nil {
		c.observe(id, n.Status())
		n.Close()
		c.Nodes[id] = nil
	}
	if m := c.electors[id]; m != nil {
		m.cancel()
		<-m.done
		delete(c.electors, id)
	}
}

// Close stops every node.
func (c *Cluster) Close() {
	for id := range c.Nodes {
		c.Crash(id)
	}
}

// Live returns the IDs of running members, sorted.
func (c *Cluster) Live() []uint64 {
	var ids []uint64
	for id, n := range c.Nodes {
		if n != nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Check records every live node's status and returns an error if an
// invariant broke: a node's highest epoch or followed epoch went down, or
// two members issued the same epoch.
func (c *Cluster) Check() error {
	for _, id := range c.Live() {
		if err := c.observe(id, c.Nodes[id].Status()); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) observe(id uint64, s peer.Status) error {
	if s.Epoch < c.lastEpoch[id] {
		return fmt.Errorf("member %d: highest epoch went back from %d to %d", id, c.lastEpoch[id], s.Epoch)
	}
	c.lastEpoch[id] = s.Epoch
	if s.Leader != 0 {
		if s.LeaderEpoch < c.lastFollow[id] {
			return fmt.Errorf("member %d: follows %d at epoch %d after following epoch %d", id, s.Leader, s.LeaderEpoch, c.lastFollow[id])
		}
		c.lastFollow[id] = s.LeaderEpoch
	}
	if p, ok := c.prios[id]; ok && p == tenure.NeverLead && (len(s.Issued) > 0 || s.Coordinator) {
		return fmt.Errorf("member %d, of priority 0, coordinated (epochs %v)", id, s.Issued)
	}
	for _, e := range s.Issued[c.issuedSeen[id]:] {
		if other, dup := c.issuedBy[e]; dup {
			return fmt.Errorf("epoch %d issued twice, by %d and by %d", e, other, id)
		}
		c.issuedBy[e] = id
	}
	c.issuedSeen[id] = len(s.Issued)
	return nil
}

// Agreed reports the coordinator if every live node follows the same
// coordinator at the same epoch and that node is coordinator itself.
func (c *Cluster) Agreed() (leader, epoch uint64, ok bool) {
	live := c.Live()
	if len(live) == 0 {
		return 0, 0, false
	}
	for i, id := range live {
		s := c.Nodes[id].Status()
		if s.Leader == 0 || (i > 0 && (s.Leader != leader || s.LeaderEpoch != epoch)) {
			return 0, 0, false
		}
		leader, epoch = s.Leader, s.LeaderEpoch
	}
	if c.Nodes[leader] == nil || !c.Nodes[leader].Status().Coordinator {
		return 0, 0, false
	}
	return leader, epoch, true
}

// Describe renders every node's view, for failure messages.
func (c *Cluster) Describe() string {
	s := ""
	for _, id := range c.Group.IDs() {
		n := c.Nodes[id]
		if n == nil {
			s += fmt.Sprintf("  %d: down\n", id)
			continue
		}
		st := n.Status()
		s += fmt.Sprintf("  %d: follows %d@%d coordinator=%t epoch=%d issued=%v\n", id, st.Leader, st.LeaderEpoch, st.Coordinator, st.Epoch, st.Issued)
	}
	st := c.Net.Stats()
	s += fmt.Sprintf("  network: sent %v delivered %d dropped %d duplicated %d unreachable %d\n",
		st.Sent, st.Delivered, st.Dropped, st.Duplicated, st.Unreachable)
	return s
}

// AwaitAgreement advances virtual time by steps of one heartbeat until the
// live nodes agree, checking invariants at each step, for at most bound. It
// returns the coordinator and how long it took.
func (c *Cluster) AwaitAgreement(bound time.Duration) (leader uint64, took time.Duration, err error) {
	start := time.Now()
	for {
		if err := c.Check(); err != nil {
			return 0, time.Since(start), err
		}
		if l, _, ok := c.Agreed(); ok {
			return l, time.Since(start), nil
		}
		if time.Since(start) >= bound {
			return 0, time.Since(start), fmt.Errorf("no agreement on one coordinator within %s:\n%s", bound, c.Describe())
		}
		time.Sleep(c.heartbeat / 4)
	}
}

// OnlyInitiator is an [Options.Configure] that gives every member but id a
// timeout of an hour, so that id alone notices a crash (or the missing
// coordinator of a fresh group) and starts an election.
func OnlyInitiator(id uint64) func(*peer.Config) {
	return func(cfg *peer.Config) {
		if cfg.ID != id {
			cfg.Timeout = time.Hour
		}
	}
}

// ElectionTypes are the message types of elections proper (not heartbeats,
// acks, rejections or resignations).
var ElectionTypes = []wire.Type{wire.Election, wire.Answer, wire.Coordinator, wire.Elected}

// Failover waits for agreement, crashes the coordinator, and measures the
// election that follows: the network's counters from the crash until all
// live members agree again, and the time that took. Crash and measurement
// run on whatever clock the caller runs on (virtual inside synctest).
func (c *Cluster) Failover(bound time.Duration) (old, leader uint64, stats memnet.Stats, took time.Duration, err error) {
	if old, _, err = c.AwaitAgreement(bound); err != nil {
		return 0, 0, memnet.Stats{}, 0, err
	}
	c.Crash(old)
	c.Net.ResetStats()
	leader, took, err = c.AwaitAgreement(bound)
	return old, leader, c.Net.Stats(), took, err
}

// MustFailover is Failover for a test: it fails t on an error.
func (c *Cluster) MustFailover(t testing.TB, bound time.Duration) (old, leader uint64, stats memnet.Stats, took time.Duration) {
	t.Helper()
	old, leader, stats, took, err := c.Failover(bound)
	if err != nil {
		t.Fatal(err)
	}
	return old, leader, stats, took
}

// Start is New then StartAll for a test: it fails t if a member cannot
// start, and closes the cluster when t ends (inside a synctest bubble, as
// t's cleanups run there).
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	c := New(o)
	t.Cleanup(c.Close)
	if err := c.StartAll(); err != nil {
		t.Fatal(err)
	}
	return c
}
