package peer

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// Step-down in the algorithms run by Node (lowest, bully, ring).
//
// A request ([wire.StepDown]: the epoch asked to step down, the member to
// hand over to, the window) reaches the coordinator's node from an
// observer ([Observer.RequestStepDown], authenticated by the group's
// secret like a status query), or from the node's own process
// ([Node.RequestStepDown]). The coordinator of that epoch takes it:
//
//   - while a lease of that epoch is outstanding, its node serves the
//     request as the record of the key's control key
//     ([tenure.ControlKey]); the elector ([tenure.Config.Control]) sees it
//     through its watch, cancels the task with [tenure.ErrSteppedDown],
//     waits for it and releases. Without an outstanding lease the node
//     resigns at once;
//   - the release resigns with the request: Resign carries the member to
//     hand over to and the window, and every member but that one (the old
//     coordinator included) abstains for the window, so only it stands;
//     without a target only the old coordinator abstains. After the window
//     anyone stands again: a transfer to a member that is down falls back
//     by itself. A member that suspects the named member as its
//     coordinator (it took over, then went silent for Timeout), or hears
//     it resign, stops abstaining at once (targetLost). A later
//     step-down's rule replaces an earlier one's;
//   - the new coordinator grants only after the handover (the old one
//     yields once its lease was released), so the old task stops before
//     the new one starts, as in every election.

// stepDown is a step-down request a coordinator took.
type stepDown struct {
	epoch  uint64 // the epoch asked to step down (0: none); it names the request
	to     uint64 // the member to hand over to, 0: any other
	window time.Duration
	until  time.Time // the window's end, from when the request was taken
	issuer string
	live   bool // the window has not ended (tick clears it and wakes watchers)
}

// KeyKind is what a key a peer store serves is: the elected key, or one
// of the leadership-control keys derived from it (package tenure's
// control key and candidate slots).
type KeyKind int

const (
	KindMain    KeyKind = iota // the key itself
	KindControl                // its control key (tenure.ControlKey)
	KindSlot                   // one of its candidate slots
)

// SplitKey tells a derived key (the control key or a candidate slot of a
// key) from a key, and returns the key it derives from and, for a slot,
// its number. A preference key is a key of its own here (KindMain): peer
// modes elect it like any key. Store adapters built on this package
// (peer/raft) share it; the suffixes are read by [tenure.BaseKey].
func SplitKey(key string) (base string, kind KeyKind, slot int) {
	b, _, ok := tenure.BaseKey(key)
	switch {
	case !ok || strings.HasSuffix(key, tenure.PreferSuffix):
		return key, KindMain, 0
	case strings.HasSuffix(key, tenure.ControlSuffix):
		return b, KindControl, 0
	}
	n, _ := strconv.Atoi(key[len(key)-2:]) // BaseKey checked: two digits
	return b, KindSlot, n
}

// takeStepDown takes a step-down request as this node's coordinator:
// epoch 0 means the current one, to 0 any other member. It reports a
// refusal as an error saying why (a request already taken for the epoch
// with the same target is accepted again). The caller holds mu.
func (n *Node) takeStepDown(epoch, to uint64, window time.Duration, issuer string) error {
	switch {
	case !n.isCoordinator():
		return fmt.Errorf("member %d is not the coordinator (it follows %d at epoch %d)", n.self, n.leader, n.leaderEpoch)
	case epoch != 0 && epoch != n.leaderEpoch:
		return fmt.Errorf("member %d coordinates under epoch %d, not %d", n.self, n.leaderEpoch, epoch)
	case to == n.self:
		return fmt.Errorf("member %d already coordinates", n.self)
	case to != 0 && !n.cfg.Group.Has(to):
		return invalidf("%d is not a member of the group", to)
	case window < tenure.MinTTL || window > tenure.MaxTTL:
		return invalidf("step-down window %s must be from %s to %s", window, tenure.MinTTL, tenure.MaxTTL)
	case n.sd.epoch == n.leaderEpoch && n.sd.to == to:
		return nil // the same request again (a retried connection)
	case n.sd.epoch == n.leaderEpoch:
		return fmt.Errorf("another step-down of member %d's epoch %d is under way", n.self, n.leaderEpoch)
	}
	now := time.Now()
	n.sd = stepDown{epoch: n.leaderEpoch, to: to, window: window, until: now.Add(window), issuer: issuer, live: true}
	if n.granted == n.leaderEpoch && n.held.epoch == n.granted {
		n.log.Info("peer: asked to step down; waiting for the leader task to stop", "id", n.self, "epoch", n.leaderEpoch,
			"to", to, "window", window)
		n.wake() // the elector's watch of the control key
		return nil
	}
	n.log.Info("peer: asked to step down; no lease outstanding, resigning", "id", n.self, "epoch", n.leaderEpoch,
		"to", to, "window", window)
	n.resign(now)
	return nil
}

// resign ends this node's coordinatorship: it abstains, tells every member
// (with the hand-over of a step-down request taken for this epoch) and
// lets the algorithm elect someone else. The caller holds mu and has
// dealt with the lease.
func (n *Node) resign(now time.Time) {
	epoch := n.leaderEpoch
	msg := wire.Message{Type: wire.Resign, Leader: n.self, LeaderEpoch: epoch}
	if n.sd.epoch == epoch && n.sd.live {
		msg.Candidate, msg.TTL = n.sd.to, n.sd.until.Sub(now)
		n.holdUntil, n.holdFor = n.sd.until, n.sd.to // replaces the hold-back of an earlier step-down
		n.log.Info("peer: stepping down on request", "id", n.self, "epoch", epoch, "to", n.sd.to, "holding_back_for", msg.TTL.Round(time.Millisecond))
	} else {
		n.log.Info("peer: resigning", "id", n.self, "epoch", epoch)
	}
	n.abstainUntil = now.Add(n.cfg.Timeout)
	n.setLeader(0, 0)
	for _, id := range n.cfg.Group.IDs() {
		if id != n.self {
			n.send(id, msg)
		}
	}
	n.alg.LeaderLost(env{n}, n.self)
}

// holdBack is a member's side of a step-down: a Resign with a window makes
// every member but the one handed over to abstain for the window. The
// latest step-down's rule replaces an earlier one's, so a member held back
// by one stands again when the next names it or nobody. The caller holds
// mu.
func (n *Node) holdBack(m wire.Message, now time.Time) {
	if m.Type != wire.Resign || m.TTL <= 0 {
		return
	}
	if n.sd.live && n.sd.epoch < m.LeaderEpoch {
		// This node's own request, as an old coordinator, is replaced
		// too: its elector stops holding back with the algorithm.
		n.sd.live = false
		n.wake()
	}
	if m.Candidate == n.self || m.Candidate == 0 {
		n.holdUntil, n.holdFor = time.Time{}, 0
		return
	}
	w := min(m.TTL, tenure.MaxTTL)
	n.holdUntil, n.holdFor = now.Add(w), m.Candidate
	n.log.Info("peer: holding back after a step-down", "id", n.self, "from", m.From, "to", m.Candidate, "window", w.Round(time.Millisecond))
}

// targetLost is a member's answer to suspecting coordinator old: if old
// is the member the last step-down handed over to, the hand-over is done
// and its coordinator gone, so the window holds nobody back any more:
// neither the algorithm (holdUntil) nor, on the old coordinator, its
// elector (the request it serves). Before, the members kept abstaining
// for the rest of the window and nobody led (found auditing the raft
// peer mode's step-down, which had the same hole). The failover that
// follows is an ordinary one: old was suspected on the same evidence.
// The caller holds mu.
func (n *Node) targetLost(old uint64) {
	if old == 0 || old != n.holdFor {
		return
	}
	if !n.holdUntil.IsZero() {
		n.log.Info("peer: the member handed over to is gone; no longer holding back", "id", n.self, "to", old)
	}
	n.holdUntil, n.holdFor = time.Time{}, 0
	if n.sd.live && n.sd.to == old {
		n.sd.live = false
		n.wake()
	}
}

// expireStepDown ends a request's window and wakes the watchers of the
// control key. The caller holds mu.
func (n *Node) expireStepDown(now time.Time) {
	if n.sd.live && !now.Before(n.sd.until) {
		n.sd.live = false
		n.wake()
	}
}

// answerStepDown takes (or refuses) a step-down request that came in on
// the transport and answers it with the node's status, flagged
// [wire.FlagAccepted] if taken. It does not block.
func (n *Node) answerStepDown(d transport.Delivery) {
	n.mu.Lock()
	err := n.usable(context.Background())
	if err == nil {
		err = n.takeStepDown(d.LeaderEpoch, d.Candidate, d.TTL, "tenure-step-down")
	}
	if err != nil {
		n.log.Info("peer: step-down request refused", "id", n.self, "epoch", d.LeaderEpoch, "to", d.Candidate, "why", err)
	}
	reply := n.statusLocked(d)
	if err == nil {
		reply.Flags |= wire.FlagAccepted
	}
	n.mu.Unlock()
	if d.Reply != nil {
		select {
		case d.Reply <- reply:
		default:
		}
	}
}

// RequestStepDown implements [tenure.StepDowner] on the coordinator's own
// node (what `tenure run --handover` uses); to ask from elsewhere, use an
// [Observer] (the URL without id), which sends the request to the
// coordinator. req.To must be "" or a member ID in decimal; req.Term 0
// means the current epoch. It fails with [tenure.ErrNoLeader] when this
// node knows no coordinator and with an error naming the coordinator when
// another member is. It never blocks on the network.
func (n *Node) RequestStepDown(ctx context.Context, key string, req tenure.StepDownRequest) (tenure.StepDown, error) {
	to, err := memberID(n.cfg.Group, req.To)
	if err != nil {
		return tenure.StepDown{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter(ctx, key); err != nil {
		return tenure.StepDown{}, err
	}
	now := time.Now()
	sd := tenure.StepDown{Leader: n.recordLocked(now)}
	switch {
	case n.leader == 0 && req.Term == 0:
		return sd, fmt.Errorf("%w: member %d knows no coordinator of %q", tenure.ErrNoLeader, n.self, key)
	case !n.isCoordinator():
		return sd, fmt.Errorf("peer: member %d is not the coordinator of %q (%d is, at epoch %d): ask through an observer (the URL without id)",
			n.self, key, n.leader, n.leaderEpoch)
	}
	if err := n.takeStepDown(req.Term, to, req.Window, req.Issuer); err != nil {
		return sd, fmt.Errorf("peer: %w", err)
	}
	sd.Grant = tenure.Lease{Key: tenure.ControlKey(key), Identity: req.Issuer, Term: n.sd.epoch, TTL: req.Window,
		Token: strconv.FormatUint(n.sd.epoch, 10)}
	return sd, nil
}

var _ tenure.StepDowner = (*Node)(nil)

// memberID parses a step-down target: "" (any, 0) or a member ID.
func memberID(g transport.Group, s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil || !g.Has(id) {
		return 0, invalidf("step-down target %q is not a member ID of the group (%s)", s, idList(g.IDs()))
	}
	return id, nil
}

func idList(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ",")
}

// controlRecord is the record of the key's control key on this node: the
// step-down request it took, while its window lasts. The caller holds mu.
func (n *Node) controlRecord(key string, now time.Time) tenure.Record {
	// An ended request keeps its term, without a holder: a watch
	// ([tenure.Follow]) holds back a record of an older term for up to
	// the last one's TTL, so a term of 0 would show the end of a window
	// cut short (see targetLost) only when the window would have ended.
	r := tenure.Record{Key: tenure.ControlKey(key), Term: n.sd.epoch}
	if !n.sd.live || !now.Before(n.sd.until) {
		return r
	}
	to := ""
	if n.sd.to != 0 {
		to = strconv.FormatUint(n.sd.to, 10)
	}
	r.Holder, r.Term, r.TTL, r.Remaining = n.sd.issuer, n.sd.epoch, n.sd.window, n.sd.until.Sub(now)
	r.Value = tenure.StepDownValue(n.sd.epoch, to)
	return r
}

// slotRecord is the record of candidate slot i of key on this node: slot i
// is the i-th member by ID, registered while it is live as this node sees
// it (itself while open; another member while heard from within Timeout),
// with its priority (its own for this node, else what its last message
// said). The caller holds mu.
func (n *Node) slotRecord(key string, i int, now time.Time) tenure.Record {
	r := tenure.Record{Key: key}
	ids := n.cfg.Group.IDs()
	if i >= len(ids) {
		return r
	}
	id := ids[i]
	var since time.Time
	switch heard, ok := n.heard[id]; {
	case id == n.self:
		since = n.started
		r.Remaining = n.cfg.Timeout
	case ok && !n.dead[id] && now.Sub(heard) <= n.cfg.Timeout:
		r.Remaining = n.cfg.Timeout - now.Sub(heard)
	default:
		return r
	}
	r.Holder, r.Term, r.TTL = strconv.FormatUint(id, 10), 1, n.cfg.Timeout
	p, _ := env{n}.Priority(id) // known: it was heard from
	r.Value = tenure.CandidateValue(p, since)
	return r
}

// derivedGet is Get of a derived key. The caller holds mu and entered
// base.
func (n *Node) derivedGet(key, base string, kind KeyKind, slot int) tenure.Record {
	now := time.Now()
	if kind == KindControl {
		return n.controlRecord(base, now)
	}
	r := n.slotRecord(key, slot, now)
	r.Key = key
	return r
}

// Candidates lists the members this node sees live (itself and those heard
// from within Timeout), as [tenure.Candidates] would from the candidate
// slots this node serves: with their priorities, ordered by ID. A node
// hears only from those that talk to it: the coordinator hears every
// member that follows it, but in bully and ring a follower hears mostly
// from the coordinator. For the whole group ask an [Observer]. A derived
// key ([tenure.BaseKey]) has no candidates of its own: Candidates refuses
// it, before anything else, with an error wrapping [tenure.ErrInvalid]
// that names its base key.
func (n *Node) Candidates(ctx context.Context, key string) ([]tenure.Candidate, error) {
	if err := checkNotDerived(key); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.enter(ctx, key); err != nil {
		return nil, err
	}
	var out []tenure.Candidate
	now := time.Now()
	for i := range n.cfg.Group.Len() {
		r := n.slotRecord(key, i, now)
		if r.Held() {
			p, _ := env{n}.Priority(n.cfg.Group.IDs()[i])
			c := tenure.Candidate{Identity: r.Holder, Priority: p, Remaining: r.Remaining}
			if r.Holder == n.Identity() {
				c.Since = n.started
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// RequestStepDown implements [tenure.StepDowner] for an observer: it asks
// the members whom they follow (as [Observer.Get]), sends the request,
// authenticated by the group's secret, to the coordinator of the highest
// epoch reported (or of req.Term), and returns once that member took it.
// req.To must be "" or a member ID in decimal. It fails with
// [tenure.ErrNoLeader] if no member reports a coordinator, with an error
// saying why if the coordinator refused (it no longer coordinates under
// that epoch, another step-down is under way), and with an error wrapping
// [tenure.ErrInvalid] in a mode whose observer cannot carry the request.
func (o *Observer) RequestStepDown(ctx context.Context, key string, req tenure.StepDownRequest) (tenure.StepDown, error) {
	sda, ok := o.ask.(transport.StepDownAsker)
	if !ok {
		return tenure.StepDown{}, invalidf("step-down is not supported in peer mode (algorithm %s)", o.cfg.Algorithm)
	}
	to, err := memberID(o.cfg.Group, req.To)
	if err != nil {
		return tenure.StepDown{}, err
	}
	if err := o.use(ctx, key); err != nil {
		return tenure.StepDown{}, err
	}
	rec, err := o.get(ctx, key)
	sd := tenure.StepDown{Leader: rec}
	if err != nil {
		return sd, err
	}
	if !rec.Held() {
		return sd, fmt.Errorf("%w: no member follows a coordinator of %q", tenure.ErrNoLeader, key)
	}
	leader, err := strconv.ParseUint(rec.Holder, 10, 64)
	if err != nil {
		return sd, fmt.Errorf("peer: coordinator %q is not a member ID", rec.Holder)
	}
	epoch := cmpOr(req.Term, rec.Term)
	qctx, cancel := context.WithTimeout(ctx, o.queryTimeout())
	defer cancel()
	r, accepted, err := sda.StepDown(qctx, leader, transport.StepDownRequest{Epoch: epoch, To: to, Window: req.Window})
	if err != nil {
		return sd, fmt.Errorf("peer: step-down request to member %d at %s: %w", leader, o.cfg.Group.Addr(leader), err)
	}
	if !accepted {
		return sd, fmt.Errorf("peer: member %d did not take the step-down request for epoch %d: it follows %d at epoch %d (see its log)",
			leader, epoch, r.Leader, r.LeaderEpoch)
	}
	sd.Grant = tenure.Lease{Key: tenure.ControlKey(key), Identity: req.Issuer, Term: epoch, TTL: req.Window,
		Token: strconv.FormatUint(epoch, 10)}
	return sd, nil
}

// slot is the record of candidate slot i as an observer sees it: the
// member of rank i by ID, registered if it answers.
func (o *Observer) slot(ctx context.Context, key string, i int) (tenure.Record, error) {
	r := tenure.Record{Key: key}
	ids := o.cfg.Group.IDs()
	if i >= len(ids) {
		return r, nil
	}
	qctx, cancel := context.WithTimeout(ctx, o.queryTimeout())
	defer cancel()
	rep, err := o.ask.Ask(qctx, ids[i])
	if err != nil {
		return r, nil // not answering: not a candidate
	}
	r.Holder, r.Term, r.TTL, r.Remaining = strconv.FormatUint(ids[i], 10), 1, o.cfg.Timeout, o.cfg.Timeout
	r.Value = tenure.CandidateValue(rep.Priority, rep.Since)
	return r, nil
}

func cmpOr(a, b uint64) uint64 {
	if a != 0 {
		return a
	}
	return b
}

// Candidates lists the members that answer a status query, as
// [tenure.Candidate]s with the priority each announces, best first (the
// highest priority, then by ID), with when each member's node started (Since, on its
// clock) where it says. A member that does not answer is not listed. It
// blocks for one round of queries, like [Observer.Get], and fails only if
// no member answers. A derived key ([tenure.BaseKey]) has no candidates of
// its own: Candidates refuses it, asking no member, with an error wrapping
// [tenure.ErrInvalid] that names its base key.
func (o *Observer) Candidates(ctx context.Context, key string) ([]tenure.Candidate, error) {
	if err := checkNotDerived(key); err != nil {
		return nil, err
	}
	if err := o.use(ctx, key); err != nil {
		return nil, err
	}
	got, err := o.ask1(ctx)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(got, func(a, b answer) int { return cmp.Or(cmp.Compare(b.r.Priority, a.r.Priority), compareID(a.id, b.id)) })
	out := make([]tenure.Candidate, 0, len(got))
	for _, a := range got {
		out = append(out, tenure.Candidate{Identity: strconv.FormatUint(a.id, 10), Priority: a.r.Priority,
			Since: a.r.Since, Remaining: o.cfg.Timeout})
	}
	return out, nil
}
