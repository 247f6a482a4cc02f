package raft

import (
	"context"
	"fmt"
	"strconv"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
)

// Step-down in the raft mode.
//
// A request (the term asked to step down, the member to hand over to, the
// window) reaches the raft leader's node from an observer over the status
// protocol (see status.go), or from its own process
// ([Node.RequestStepDown]). The leader of that term takes it:
//
//   - while its grant of that term is held, its node serves the request as
//     the record of the key's control key ([tenure.ControlKey]); the
//     elector ([tenure.Config.Control]) sees it through its watch, cancels
//     the task with [tenure.ErrSteppedDown], waits for it and releases;
//     without a grant the node grants nothing more in that term and hands
//     over at once;
//   - the release hands raft leadership over: to the named member with
//     raft's LeadershipTransferToServer, else with LeadershipTransfer; the
//     new leader's term is higher, and it grants only with a quorum, so the
//     old task stopped before the new one can start (the old leader
//     released first);
//   - raft has no abstention: the window holds back the old leader's own
//     elector (it serves the request while the window lasts and raft's
//     term is still the one asked to step down); if the named member
//     cannot take over, raft elects whoever it elects.
//   - the request is done once raft's term moved on: the named member
//     took over, or tried and raft elected another (the named member
//     crashed, say). It then holds nobody back: the old leader, if raft
//     elects it again, leads at once instead of leaving the key unled for
//     the rest of the window. That is safe: its grant of the old term
//     ended with the term, and a new grant needs leadership of a new term
//     and a quorum, as after any election.

// stepDown is a step-down request this node took as raft leader.
type stepDown struct {
	term   uint64 // the term asked to step down (0: none)
	to     string // the member to hand over to, "" for any
	window time.Duration
	until  time.Time
	issuer string
	gone   bool // a hand-over to the member named failed (see Node.transfer)
}

// live reports whether the request's window lasts at now and raft's
// current term, term, is still the one asked to step down (see above).
func (s stepDown) live(now time.Time, term uint64) bool {
	return s.term != 0 && s.term == term && now.Before(s.until)
}

// member returns the configured member id, if any.
func (n *Node) member(id string) (Member, bool) {
	for _, m := range n.cfg.Members {
		if m.ID == id {
			return m, true
		}
	}
	return Member{}, false
}

// takeStepDown takes a step-down request as raft leader of term (0: the
// current one), or says why not. The same request again is accepted.
func (n *Node) takeStepDown(term uint64, to string, window time.Duration, issuer string) error {
	if n.closed.Load() {
		return tenure.ErrClosed
	}
	cur := n.raft.CurrentTerm()
	if term == 0 {
		term = cur
	}
	_, leader := n.raft.LeaderWithID()
	switch {
	case n.raft.State() != hraft.Leader:
		return fmt.Errorf("member %s is not the raft leader (it sees %q leading term %d)", n.cfg.ID, leader, cur)
	case term != cur:
		return fmt.Errorf("member %s leads term %d, not %d", n.cfg.ID, cur, term)
	case to == n.cfg.ID:
		return fmt.Errorf("member %s already leads", n.cfg.ID)
	case window < tenure.MinTTL || window > tenure.MaxTTL:
		return invalidf("step-down window %s must be from %s to %s", window, tenure.MinTTL, tenure.MaxTTL)
	}
	if _, ok := n.member(to); to != "" && !ok {
		return invalidf("step-down target %q is not a member of the cluster", to)
	}
	now := time.Now()
	n.mu.Lock()
	if n.sd.term == term {
		same := n.sd.to == to
		n.mu.Unlock()
		if same {
			return nil // the same request again (a retried connection)
		}
		return fmt.Errorf("another step-down of member %s's term %d is under way", n.cfg.ID, term)
	}
	n.sd = stepDown{term: term, to: to, window: window, until: now.Add(window), issuer: issuer}
	held := n.grant.held && n.grant.term == term
	if !held && n.grant.term < term {
		n.grant = grant{term: term} // no grant in this term any more
	}
	n.wakeControl()
	n.mu.Unlock()
	time.AfterFunc(window, func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.wakeControl() // the window ended
	})
	n.cfg.Logger.Info("asked to step down", "id", n.cfg.ID, "term", term, "to", to, "window", window, "grant_held", held)
	if !held {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HeartbeatTimeout*4)
			defer cancel()
			if err := n.transfer(ctx); err != nil {
				n.cfg.Logger.Warn("step-down: hand-over failed", "id", n.cfg.ID, "term", term, "err", err)
			}
		}()
	}
	return nil
}

// answerStepDown is the status protocol's step-down handler.
func (n *Node) answerStepDown(req stepDownReq) statusReply {
	err := n.takeStepDown(req.Term, req.To, time.Duration(req.WindowMS)*time.Millisecond, "tenure-step-down")
	s := n.status()
	if err != nil {
		s.Refused = err.Error()
		n.cfg.Logger.Info("step-down request refused", "id", n.cfg.ID, "term", req.Term, "to", req.To, "why", err)
	} else {
		s.Accepted = true
	}
	return s
}

// RequestStepDown implements [tenure.StepDowner] on the raft leader's own
// node; to ask from elsewhere, use the mode's observer (the URL without
// id). req.To must be "" or a member ID; req.Term 0 means the current
// term. It fails with [tenure.ErrNoLeader] while this node knows no
// leader, and with an error naming the leader when another member leads.
// It does not block on the network.
func (n *Node) RequestStepDown(ctx context.Context, key string, req tenure.StepDownRequest) (tenure.StepDown, error) {
	if err := n.checkKey(key); err != nil {
		return tenure.StepDown{}, err
	}
	if err := ctx.Err(); err != nil {
		return tenure.StepDown{}, err
	}
	if n.closed.Load() {
		return tenure.StepDown{}, tenure.ErrClosed
	}
	sd := tenure.StepDown{Leader: n.record(key)}
	switch {
	case sd.Leader.Holder == "" && req.Term == 0:
		return sd, fmt.Errorf("%w: member %s knows no raft leader of %q", tenure.ErrNoLeader, n.cfg.ID, key)
	case sd.Leader.Holder != n.cfg.ID:
		return sd, fmt.Errorf("raft: member %s does not lead %q (%q does): ask through an observer (the URL without id)",
			n.cfg.ID, key, sd.Leader.Holder)
	}
	if err := n.takeStepDown(req.Term, req.To, req.Window, req.Issuer); err != nil {
		return sd, fmt.Errorf("raft: %w", err)
	}
	n.mu.Lock()
	term := n.sd.term
	n.mu.Unlock()
	sd.Grant = tenure.Lease{Key: tenure.ControlKey(key), Identity: req.Issuer, Term: term, TTL: req.Window,
		Token: strconv.FormatUint(term, 10)}
	return sd, nil
}

var _ tenure.StepDowner = (*Node)(nil)

// wakeControl wakes the watches of the control key. The caller holds mu.
func (n *Node) wakeControl() {
	for w := range n.ctlWatch {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// derivedRecord is the record of a derived key: the control key reads as
// the step-down request this node took while its window lasts; candidate
// slot i as the i-th member, registered if it is this node or the leader
// it knows (a raft node knows no more about the others' liveness).
func (n *Node) derivedRecord(key, base string, kind peer.KeyKind, slot int) tenure.Record {
	r := tenure.Record{Key: key}
	now := time.Now()
	if kind == peer.KindControl {
		n.mu.Lock()
		sd := n.sd
		n.mu.Unlock()
		if !sd.live(now, n.raft.CurrentTerm()) {
			// Keep the term: a watch ([tenure.Follow]) holds back a
			// record of an older term for up to the last one's TTL.
			r.Term = sd.term
			return r
		}
		r.Holder, r.Term, r.TTL, r.Remaining = sd.issuer, sd.term, sd.window, sd.until.Sub(now)
		r.Value = tenure.StepDownValue(sd.term, sd.to)
		return r
	}
	if slot >= len(n.cfg.Members) {
		return r
	}
	id := n.cfg.Members[slot].ID
	_, leader := n.raft.LeaderWithID()
	var since time.Time
	prio := tenure.DefaultPriority // the leader's is not known here
	switch {
	case id == n.cfg.ID:
		since, prio = n.started, n.cfg.priority()
	case string(leader) == id:
	default:
		return r
	}
	r.Holder, r.Term, r.TTL, r.Remaining = id, 1, n.cfg.HeartbeatTimeout, n.cfg.HeartbeatTimeout
	r.Value = tenure.CandidateValue(prio, since)
	return r
}

// watchDerived is Watch of a derived key: [tenure.Follow] woken by every
// change of the step-down request.
func (n *Node) watchDerived(ctx context.Context, key, base string, kind peer.KeyKind, slot int) (<-chan tenure.Record, error) {
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	n.mu.Lock()
	n.ctlWatch[wake] = struct{}{}
	n.mu.Unlock()
	context.AfterFunc(ctx, func() {
		n.mu.Lock()
		delete(n.ctlWatch, wake)
		n.mu.Unlock()
	})
	// Raft's leader and term change the records too: a new term ends a
	// step-down request (see above), a new leader changes the slots.
	obs, o := n.observeLeadership()
	go func() {
		defer n.raft.DeregisterObserver(o)
		for {
			select {
			case <-n.done:
				cancel()
				return
			case <-ctx.Done():
				return
			case <-obs:
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
	}()
	get := func(ctx context.Context) (tenure.Record, error) {
		if n.closed.Load() {
			return tenure.Record{}, tenure.ErrClosed
		}
		return n.derivedRecord(key, base, kind, slot), nil
	}
	return tenure.Follow{Get: get, Wake: wake, Announced: true}.Start(ctx), nil
}

// transferTarget is whom a hand-over of term goes to: the member a live
// step-down request of that term names, else nobody in particular. gone
// reports that a hand-over to that member failed already (see
// [Node.transfer]).
func (n *Node) transferTarget(term uint64) (m Member, gone, ok bool) {
	n.mu.Lock()
	sd := n.sd
	n.mu.Unlock()
	if sd.to == "" || !sd.live(time.Now(), term) {
		return Member{}, false, false
	}
	m, ok = n.member(sd.to)
	return m, sd.gone, ok
}

// targetGone records that a hand-over of term to the member the step-down
// request names failed: the member is down or cannot catch up.
func (n *Node) targetGone(term uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sd.term == term {
		n.sd.gone = true
	}
}
