package peer

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/tcp"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// Node is one member running an election [Algorithm] over a [transport.Transport]. It
// is also the member's [tenure.Store] for one logical key (see store.go and
// the package doc). Create it with [NewNode] or [Open]; all methods are safe
// for concurrent use.
type Node struct {
	cfg    Config
	self   uint64
	alg    Algorithm
	tr     transport.Transport
	epochs EpochStore
	log    *slog.Logger

	mu           sync.Mutex
	closed       bool
	key          string
	maxEpoch     uint64
	leader       uint64 // the coordinator followed, 0: none
	leaderEpoch  uint64
	leaderHeard  time.Time
	granted      uint64 // epoch of the lease handed out by Acquire, 0: none
	held         grant  // the last lease handed out, until it surely ended
	ho           handover
	heard        map[uint64]time.Time
	dead         map[uint64]bool
	abstains     map[uint64]bool
	prio         map[uint64]int // each member's priority, as its last message said
	abstainUntil time.Time
	holdUntil    time.Time                            // the end of the hold-back of the last step-down (stepdown.go)
	holdFor      uint64                               // the member that hold-back is for, 0: any
	watchers     map[chan struct{}]context.CancelFunc // each watch's wake and end
	issued       []uint64                             // epochs this node was coordinator under, in order
	sd           stepDown                             // the last step-down request taken (stepdown.go)
	started      time.Time                            // when the node started
	// exhaustedLogged: the epochs ran out, and that was logged (once).
	exhaustedLogged bool

	stop chan struct{}
	done chan struct{}
}

// grant is a lease the node handed out, kept after the node stopped being
// coordinator until the lease surely ended (see [Node.holding]).
type grant struct {
	epoch   uint64 // 0: none
	ttl     time.Duration
	renewed time.Time // the last successful Acquire or Renew
	value   string    // published with the grant ([Node.AcquireClaim])
}

// handover is a new coordinator's wait before it grants its lease: every
// other member must yield or stay silent (see [Node.checkHandover]).
type handover struct {
	epoch   uint64 // the coordinatorship it is for
	since   time.Time
	yielded map[uint64]bool
	ready   bool // the lease may be granted
}

// NewNode starts a node running alg for cfg: it loads the epoch (an
// error if the epoch file is corrupt), opens the TCP transport unless
// cfg.Transport is set, and starts the node's goroutine. cfg gets
// defaults and is validated first; cfg.Algorithm still names the group's
// algorithm (the TCP group key binds it). [Open] does the same for a
// registered algorithm. Stop the node with Close.
func NewNode(cfg Config, alg Algorithm) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if alg == nil {
		return nil, invalidf("NewNode needs an algorithm")
	}
	if cfg.Key != "" {
		if err := tenure.CheckKey(cfg.Key); err != nil {
			return nil, err
		}
	}
	epochs := cfg.Epochs
	if epochs == nil {
		f, err := OpenEpochFile(cfg.StateDir, cfg.ID)
		if err != nil {
			return nil, err
		}
		epochs = f
	}
	epoch, err := epochs.Load()
	if err != nil {
		return nil, err
	}
	tr := cfg.Transport
	if tr == nil {
		t, err := tcp.Listen(cfg.tcpConfig())
		if err != nil {
			return nil, err
		}
		tr = t
	}
	n := &Node{
		cfg: cfg, self: cfg.ID, alg: alg, tr: tr, epochs: epochs, log: cfg.Logger,
		key:      cfg.Key,
		maxEpoch: epoch,
		heard:    map[uint64]time.Time{},
		dead:     map[uint64]bool{},
		abstains: map[uint64]bool{},
		prio:     map[uint64]int{},
		watchers: map[chan struct{}]context.CancelFunc{},
		started:  time.Now(),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	n.mu.Lock()
	n.alg.Start(env{n})
	n.mu.Unlock()
	go n.run()
	return n, nil
}

// answer puts the node's answer to a status query on its reply channel:
// the coordinator it follows and the record Get would return. A query is
// never a sign of life and carries no claim, so it touches no election
// state. It does not block.
func (n *Node) answer(q transport.Delivery) {
	if q.Reply == nil {
		return
	}
	n.mu.Lock()
	reply := n.statusLocked(q)
	n.mu.Unlock()
	select {
	case q.Reply <- reply:
	default:
	}
}

// statusLocked is the node's answer to request q: the coordinator it
// follows, the record Get would return, and in Candidate when the node
// started (Unix milliseconds), and its priority. The caller holds mu.
func (n *Node) statusLocked(q transport.Delivery) wire.Message {
	r := n.recordLocked(time.Now())
	return wire.Message{Type: wire.StatusReply, To: q.From, Ref: q.Ref, Epoch: n.maxEpoch, Leader: n.leader,
		LeaderEpoch: n.leaderEpoch, TTL: r.TTL, Remaining: r.Remaining, Value: r.Value, Candidate: uint64(max(n.started.UnixMilli(), 1)),
		Priority: uint32(n.cfg.MemberPriority())}
}

func (n *Node) run() {
	defer close(n.done)
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	recv := n.tr.Recv()
	for {
		select {
		case <-n.stop:
			return
		case d, ok := <-recv:
			if !ok {
				return
			}
			n.dispatch(d)
		case <-t.C:
			n.tick()
		}
	}
}

// tick runs the heartbeat period: coordinator heartbeats, the failure
// detector, then the algorithm's timers.
func (n *Node) tick() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	now := time.Now()
	n.expireGrant(now)
	n.expireStepDown(now)
	n.checkHandover(now)
	if n.isCoordinator() {
		for _, id := range n.cfg.Group.IDs() {
			if id != n.self {
				n.send(id, wire.Message{Type: wire.Heartbeat, Leader: n.self, LeaderEpoch: n.leaderEpoch})
			}
		}
	} else if n.leader != 0 && now.Sub(n.leaderHeard) > n.cfg.Timeout {
		old := n.leader
		n.log.Info("peer: coordinator suspected", "id", n.self, "coordinator", old, "epoch", n.leaderEpoch,
			"silent_for", now.Sub(n.leaderHeard).Round(time.Millisecond))
		n.setLeader(0, 0)
		n.targetLost(old)
		n.alg.LeaderLost(env{n}, old)
	}
	n.alg.Tick(env{n})
}

func (n *Node) isCoordinator() bool { return n.leader == n.self && n.leader != 0 }

// granting reports whether this node is coordinator and its handover is
// complete. The caller holds mu.
func (n *Node) granting() bool {
	return n.isCoordinator() && n.ho.ready && n.ho.epoch == n.leaderEpoch
}

// dispatch routes one delivery: status queries are answered, step-down
// requests taken or refused (and answered), every other message goes to
// the election.
func (n *Node) dispatch(d transport.Delivery) {
	switch d.Type {
	case wire.StatusQuery:
		n.answer(d)
		return
	case wire.StepDown:
		n.answerStepDown(d)
		return
	}
	n.handle(d.Message)
}

// handle processes one received election message.
func (n *Node) handle(m wire.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || m.To != n.self || m.From == n.self || !n.cfg.Group.Has(m.From) || !m.Type.Valid() || m.Type.IsStatus() || m.Type.IsRequest() {
		return
	}
	now := time.Now()
	n.heard[m.From] = now
	delete(n.dead, m.From)
	n.abstains[m.From] = m.Flags&wire.FlagAbstain != 0
	n.prio[m.From] = int(m.Priority)
	if m.Epoch > n.maxEpoch {
		if err := n.raiseEpoch(m.Epoch); err != nil {
			n.log.Error("peer: cannot persist the epoch; ignoring the message", "id", n.self, "err", err)
			return
		}
		if n.isCoordinator() && n.leaderEpoch < n.maxEpoch {
			n.log.Info("peer: stepping down: a higher epoch exists", "id", n.self, "epoch", n.leaderEpoch,
				"higher", n.maxEpoch, "from", m.From)
			n.setLeader(0, 0)
			n.alg.LeaderLost(env{n}, n.self)
		}
	}
	switch m.Type {
	case wire.Heartbeat, wire.Coordinator:
		// A claim by the coordinator itself: follow it unless stale, in
		// which case tell it so it steps down. A coordinator waiting for
		// the members to yield gets an answer to each claim.
		if m.Leader == m.From {
			if m.LeaderEpoch < n.maxEpoch {
				n.send(m.From, wire.Message{Type: wire.Reject, Leader: m.From, LeaderEpoch: m.LeaderEpoch})
			} else if n.adopt(m.From, m.LeaderEpoch) && m.Flags&wire.FlagHandover != 0 {
				n.yield()
			}
		}
	case wire.Elected:
		if m.Flags&wire.FlagHandover != 0 && n.leader == m.Leader && n.leaderEpoch == m.LeaderEpoch {
			n.yield()
		}
	case wire.Yield:
		if n.isCoordinator() && m.Leader == n.self && m.LeaderEpoch == n.leaderEpoch && n.ho.epoch == n.leaderEpoch {
			n.ho.yielded[m.From] = true
			n.checkHandover(now)
		}
	case wire.Resign:
		n.holdBack(m, now)
		if m.TTL <= 0 {
			n.targetLost(m.From) // it resigned without handing over
		}
		if m.From == n.leader && m.LeaderEpoch == n.leaderEpoch {
			n.setLeader(0, 0)
			n.alg.LeaderLost(env{n}, m.From)
		}
	}
	n.alg.Receive(env{n}, m)
}

// send fills the envelope and sends; the caller holds mu.
func (n *Node) send(to uint64, m wire.Message) error {
	m.From, m.To, m.Epoch = n.self, to, n.maxEpoch
	m.Priority = uint32(n.cfg.MemberPriority())
	if n.abstaining(time.Now()) {
		m.Flags |= wire.FlagAbstain
	}
	if n.isCoordinator() && !n.ho.ready && m.Leader == n.self &&
		(m.Type == wire.Heartbeat || m.Type == wire.Coordinator || m.Type == wire.Elected) {
		m.Flags |= wire.FlagHandover
	}
	return n.tr.Send(m)
}

// abstaining reports whether this node must not stand for election: it
// resigned within Timeout, holds back for a step-down, or has priority 0
// (for good). The caller holds mu.
func (n *Node) abstaining(now time.Time) bool {
	return n.neverLeads() || now.Before(n.abstainUntil) || now.Before(n.holdUntil)
}

// neverLeads reports whether this member has priority 0.
func (n *Node) neverLeads() bool { return n.cfg.MemberPriority() == tenure.NeverLead }

// raiseEpoch persists e as the highest known epoch if it is higher.
func (n *Node) raiseEpoch(e uint64) error {
	if e <= n.maxEpoch {
		return nil
	}
	if err := n.epochs.Save(e); err != nil {
		return err
	}
	n.maxEpoch = e
	return nil
}

// nextEpoch returns the smallest epoch above every known one that only this
// member may issue: epochs are congruent to the member's rank modulo the
// group size, so two coordinators never share an epoch, even when elected on
// both sides of a partition from the same starting point. ok is false when
// no such epoch fits in 64 bits: the epochs are used up, and wrapping
// around would issue a fencing term below one already issued.
func (n *Node) nextEpoch() (e uint64, ok bool) {
	size := uint64(n.cfg.Group.Len())
	rank := uint64(n.cfg.Group.Index(n.self))
	if n.maxEpoch == math.MaxUint64 {
		return 0, false
	}
	e = n.maxEpoch + 1
	step := size - e%size + rank
	if rem := e % size; rem <= rank {
		step = rank - rem
	}
	if e > math.MaxUint64-step {
		return 0, false
	}
	return e + step, true
}

// elect makes this node coordinator under a fresh epoch.
func (n *Node) elect() (uint64, error) {
	if n.neverLeads() {
		return 0, fmt.Errorf("peer: member %d has priority 0 and never coordinates", n.self)
	}
	if n.abstaining(time.Now()) {
		return 0, fmt.Errorf("peer: member %d resigned or holds back for a step-down, and abstains until %s", n.self,
			later(n.abstainUntil, n.holdUntil).Format(time.RFC3339Nano))
	}
	e, ok := n.nextEpoch()
	if !ok {
		err := fmt.Errorf("peer: member %d cannot coordinate: the epochs are used up (highest known %d); "+
			"it never issues a lower one: every member's epoch file must be reset once no term issued is in use", n.self, n.maxEpoch)
		if !n.exhaustedLogged {
			n.exhaustedLogged = true
			n.log.Error(err.Error(), "id", n.self)
		}
		return 0, err
	}
	if err := n.raiseEpoch(e); err != nil {
		return 0, fmt.Errorf("peer: persisting epoch %d: %w", e, err)
	}
	n.issued = append(n.issued, e)
	n.log.Info("peer: elected coordinator", "id", n.self, "epoch", e, "algorithm", n.cfg.Algorithm)
	n.ho = handover{epoch: e, since: time.Now(), yielded: map[uint64]bool{}}
	n.setLeader(n.self, e)
	n.checkHandover(n.ho.since)
	return e, nil
}

// handoverQuiet is how long a member must have been silent, both before
// and since this node's election, for the new coordinator to grant without
// its Yield: a member that sends nothing for Timeout is taken to have
// crashed (the synchrony assumption), plus one heartbeat for an answer
// still in flight.
func (n *Node) handoverQuiet() time.Duration { return n.cfg.Timeout + n.cfg.Heartbeat }

// checkHandover lifts a new coordinator's wait once this node holds no
// older grant itself and every other member yielded to its epoch or has
// been silent for handoverQuiet since the later of the election and the
// last message heard from it; it then wakes watchers so that a waiting
// elector acquires at once. The caller holds mu.
func (n *Node) checkHandover(now time.Time) {
	if !n.isCoordinator() || n.ho.ready || n.ho.epoch != n.leaderEpoch || n.holding(n.leaderEpoch) {
		return
	}
	for _, id := range n.cfg.Group.IDs() {
		if id == n.self || n.ho.yielded[id] {
			continue
		}
		if now.Sub(later(n.heard[id], n.ho.since)) < n.handoverQuiet() {
			return
		}
	}
	n.ho.ready = true
	n.log.Debug("peer: handover complete, granting", "id", n.self, "epoch", n.leaderEpoch,
		"after", now.Sub(n.ho.since).Round(time.Millisecond))
	n.wake()
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// holding reports whether a lease this node handed out under an epoch
// below e may still be in use. The caller holds mu.
func (n *Node) holding(e uint64) bool { return n.held.epoch != 0 && n.held.epoch < e }

// ended forgets the held grant (its holder released it, came back to
// campaign, or it ran out) and tells the coordinator this node follows
// that it yields. The caller holds mu.
func (n *Node) ended(why string) {
	if n.held.epoch == 0 {
		return
	}
	n.log.Debug("peer: the lease of an earlier epoch ended", "id", n.self, "epoch", n.held.epoch, "why", why)
	n.held = grant{}
	if n.isCoordinator() {
		n.checkHandover(time.Now())
	} else {
		n.yield()
	}
}

// expireGrant ends a held grant that is no longer current once TTL passed
// since its last successful renewal by this node's clock: the elector
// cancels its task at the latest RenewDeadline (< TTL) after it sent that
// renewal. The caller holds mu.
func (n *Node) expireGrant(now time.Time) {
	if n.held.epoch != 0 && !(n.isCoordinator() && n.leaderEpoch == n.held.epoch) &&
		!now.Before(n.held.renewed.Add(n.held.ttl)) {
		n.ended("its TTL ran out since its last renewal")
	}
}

// yield answers the coordinator this node follows: [wire.Yield] at its epoch
// if this node holds no older grant, else at the held grant's epoch (not
// yet). The caller holds mu.
func (n *Node) yield() {
	if n.leader == 0 || n.leader == n.self {
		return
	}
	e := n.leaderEpoch
	if n.holding(e) {
		e = n.held.epoch
	}
	n.send(n.leader, wire.Message{Type: wire.Yield, Leader: n.leader, LeaderEpoch: e})
}

// adopt follows leader at epoch unless the claim is stale.
func (n *Node) adopt(leader, epoch uint64) bool {
	if leader == 0 || epoch < n.maxEpoch || epoch < n.leaderEpoch || !n.cfg.Group.Has(leader) {
		return false
	}
	if leader == n.self {
		// An echo of our own claim is fine; a claim about us that we do
		// not hold (from before a restart) is not.
		return n.isCoordinator() && epoch == n.leaderEpoch
	}
	if err := n.raiseEpoch(epoch); err != nil {
		n.log.Error("peer: cannot persist the epoch; not following the coordinator", "id", n.self, "err", err)
		return false
	}
	if n.leader != leader || n.leaderEpoch != epoch {
		if n.isCoordinator() {
			n.log.Info("peer: stepping down for a newer coordinator", "id", n.self, "epoch", n.leaderEpoch,
				"coordinator", leader, "coordinator_epoch", epoch)
		} else {
			n.log.Debug("peer: following coordinator", "id", n.self, "coordinator", leader, "epoch", epoch)
		}
		n.setLeader(leader, epoch)
	}
	n.leaderHeard = time.Now()
	return true
}

// setLeader changes the coordinator followed and wakes watchers.
func (n *Node) setLeader(id, epoch uint64) {
	if id != n.self || epoch != n.granted {
		n.granted = 0
	}
	n.leader, n.leaderEpoch, n.leaderHeard = id, epoch, time.Now()
	n.wake()
}

// wake signals every watcher to look at the record again. The caller holds
// mu.
func (n *Node) wake() {
	for w := range n.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// Status is a node's view, for tests, tools and health checks.
type Status struct {
	ID uint64
	// Leader is the coordinator followed (0: none, an election is running),
	// LeaderEpoch its epoch; Coordinator is whether that is this node.
	Leader, LeaderEpoch uint64
	Coordinator         bool
	// Epoch is the highest epoch known (persisted).
	Epoch uint64
	// Issued lists the epochs this node was coordinator under, since it
	// started, oldest first.
	Issued []uint64
	// Granting is whether this coordinator's handover is complete: every
	// other member yielded or stayed silent, so Acquire may grant.
	Granting bool
}

// Status returns the node's current view. It never blocks on the network.
func (n *Node) Status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return Status{ID: n.self, Leader: n.leader, LeaderEpoch: n.leaderEpoch, Coordinator: n.isCoordinator(),
		Epoch: n.maxEpoch, Issued: append([]uint64(nil), n.issued...), Granting: n.granting()}
}

// Transport returns the node's transport (a [*tcp.Transport] unless Config.Transport
// was set), for its counters.
func (n *Node) Transport() transport.Transport { return n.tr }

// ID returns the node's member ID.
func (n *Node) ID() uint64 { return n.self }

// Identity returns the identity the node's Store accepts: its ID in decimal.
func (n *Node) Identity() string { return strconv.FormatUint(n.self, 10) }

// env is the Node's side of the Algorithm contract; its methods run with
// n.mu held.
type env struct{ n *Node }

func (e env) Self() uint64                         { return e.n.self }
func (e env) Group() transport.Group               { return e.n.cfg.Group }
func (e env) Now() time.Time                       { return time.Now() }
func (e env) Config() Config                       { return e.n.cfg }
func (e env) Send(to uint64, m wire.Message) error { return e.n.send(to, m) }
func (e env) MarkDead(id uint64)                   { e.n.dead[id] = true }
func (e env) Abstaining() bool                     { return e.n.abstaining(time.Now()) }
func (e env) Abstains(id uint64) bool              { return e.n.abstains[id] }
func (e env) Leader() (uint64, uint64)             { return e.n.leader, e.n.leaderEpoch }
func (e env) Elect() (uint64, error)               { return e.n.elect() }
func (e env) Adopt(leader, epoch uint64) bool {
	before, beforeEpoch := e.n.leader, e.n.leaderEpoch
	ok := e.n.adopt(leader, epoch)
	if ok && (before != leader || beforeEpoch != epoch) {
		e.n.yield()
	}
	return ok
}
func (e env) Logf(format string, args ...any) {
	e.n.log.Debug(fmt.Sprintf(format, args...), "id", e.n.self)
}

func (e env) Priority(id uint64) (int, bool) {
	if id == e.n.self {
		return e.n.cfg.MemberPriority(), true
	}
	p, ok := e.n.prio[id]
	return p, ok
}

func (e env) Alive(id uint64) bool {
	if id == e.n.self {
		return true
	}
	t, ok := e.n.heard[id]
	return ok && !e.n.dead[id] && time.Since(t) <= e.n.cfg.Timeout
}

func (e env) StepDown() {
	if e.n.isCoordinator() {
		e.n.log.Info("peer: stepping down", "id", e.n.self, "epoch", e.n.leaderEpoch)
		e.n.setLeader(0, 0)
	}
}
