package ring

import (
	"maps"
	"slices"
	"time"

	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/wire"
)

func init() { peer.Register("ring", peer.NodeOpener(New)) }

// New returns the Ring algorithm for one node (see the package doc).
func New() peer.Algorithm { return &ring{suspected: peer.Suspicions{}} }

type pending struct {
	to     uint64
	msg    wire.Message
	sentAt time.Time
}

type ring struct {
	graceEnd    time.Time
	participant bool
	electStart  time.Time
	ref         uint64
	pending     map[uint64]pending // by Ref
	suspected   peer.Suspicions
}

// ackWait is how long a ring message waits for its Ack.
func ackWait(env peer.Env) time.Duration { return 2 * env.Config().Heartbeat }

// electionWait bounds one election round before a participant starts over.
func electionWait(env peer.Env) time.Duration {
	c := env.Config()
	return 2*c.Timeout + time.Duration(2*env.Group().Len())*ackWait(env)
}

func (r *ring) Start(env peer.Env) {
	r.graceEnd = env.Now().Add(env.Config().Timeout)
	r.pending = map[uint64]pending{}
}

// successor is the next member after self on the ring not believed dead, or
// self if there is none.
func (r *ring) successor(env peer.Env) uint64 {
	ids := env.Group().IDs()
	i := env.Group().Index(env.Self())
	for k := 1; k < len(ids); k++ {
		id := ids[(i+k)%len(ids)]
		if !r.suspected.Suspected(env, id) {
			return id
		}
	}
	return env.Self()
}

// forward sends m to the successor, skipping members that refuse.
func (r *ring) forward(env peer.Env, m wire.Message) {
	for {
		to := r.successor(env)
		if to == env.Self() {
			// Alone on the ring: stand alone, unless abstaining.
			if leader, _ := env.Leader(); m.Type == wire.Election && leader != env.Self() && !env.Abstaining() {
				r.participant = false
				if _, err := env.Elect(); err != nil {
					env.Logf("ring: cannot become coordinator: %v", err)
				}
			}
			return
		}
		r.ref++
		m.Ref = r.ref
		m.Hops++
		if err := env.Send(to, m); err != nil {
			r.suspected.Suspect(env, to)
			continue
		}
		r.pending[m.Ref] = pending{to: to, msg: m, sentAt: env.Now()}
		return
	}
}

// candidate is this member's own candidacy: itself and its priority, or
// 0 while it abstains (a member of priority 0 always does).
func (r *ring) candidate(env peer.Env) (id uint64, prio int) {
	if env.Abstaining() {
		return 0, 0
	}
	p, _ := env.Priority(env.Self())
	return env.Self(), p
}

// beats reports whether the candidate an Election carries ranks above
// this member's own candidacy (id 0: none): a higher priority, then a
// higher ID.
func beats(m wire.Message, own uint64, prio int) bool {
	return own == 0 || peer.Outranks(int(m.CandidatePriority), m.Candidate, prio, own, true)
}

func (r *ring) initiate(env peer.Env) {
	if env.Abstaining() {
		return
	}
	r.participant, r.electStart = true, env.Now()
	env.Logf("ring: election started")
	self, prio := r.candidate(env)
	r.forward(env, wire.Message{Type: wire.Election, Candidate: self, CandidatePriority: uint32(prio)})
}

func (r *ring) Tick(env peer.Env) {
	peer.HeartbeatLeader(env)
	now := env.Now()
	// In Ref order, so runs are reproducible (map order is random).
	for _, ref := range slices.Sorted(maps.Keys(r.pending)) {
		if p := r.pending[ref]; now.Sub(p.sentAt) >= ackWait(env) {
			delete(r.pending, ref)
			r.suspected.Suspect(env, p.to)
			env.Logf("ring: no ack from %d, skipping it", p.to)
			r.forward(env, p.msg)
		}
	}
	leader, _ := env.Leader()
	if leader != 0 {
		r.participant = false
	}
	switch {
	case leader != 0 || now.Before(r.graceEnd):
	case !r.participant:
		r.initiate(env)
	case now.Sub(r.electStart) >= electionWait(env):
		r.initiate(env) // the round was lost
	}
}

func (r *ring) Receive(env peer.Env, m wire.Message) {
	r.suspected.Clear(m.From)
	switch m.Type {
	case wire.Ack:
		delete(r.pending, m.Ref)
	case wire.Election, wire.Elected:
		env.Send(m.From, wire.Message{Type: wire.Ack, Ref: m.Ref})
		if m.Hops > uint64(2*env.Group().Len()) {
			// Its candidate died or resigned while it travelled (a live
			// candidate stops it within 2n hops): let it die. Participants
			// start over after electionWait.
			return
		}
		r.handleRing(env, m)
	}
}

func (r *ring) handleRing(env peer.Env, m wire.Message) {
	self := env.Self()
	switch m.Type {
	case wire.Election:
		if m.Candidate == 0 {
			// A restart (see below): stand again, as if no round were under way.
			r.participant = false
		}
		own, prio := r.candidate(env)
		switch {
		case m.Candidate == self:
			leader, _ := env.Leader()
			switch {
			case leader == self:
				return // a duplicate
			case own == 0:
				// We stood, then began to abstain (a step-down's hold-back)
				// while our election went round: it may have swallowed the
				// others'. Restart the round rather than let it die, which
				// would leave the ring leaderless until electionWait passes
				// (longer than a hand-over window).
				r.participant = false
				r.forward(env, wire.Message{Type: wire.Election, Hops: m.Hops})
				return
			}
			r.participant = false
			epoch, err := env.Elect()
			if err != nil {
				env.Logf("ring: cannot become coordinator: %v", err)
				return
			}
			r.forward(env, wire.Message{Type: wire.Elected, Leader: self, LeaderEpoch: epoch})
		case beats(m, own, prio):
			r.participant, r.electStart = true, env.Now()
			r.forward(env, wire.Message{Type: wire.Election, Candidate: m.Candidate, CandidatePriority: m.CandidatePriority, Hops: m.Hops})
		case !r.participant:
			r.participant, r.electStart = true, env.Now()
			r.forward(env, wire.Message{Type: wire.Election, Candidate: own, CandidatePriority: uint32(prio)})
		}
	case wire.Elected:
		if m.Leader == self {
			return // the announcement went round
		}
		if !env.Adopt(m.Leader, m.LeaderEpoch) {
			return // stale
		}
		r.participant = false
		r.forward(env, wire.Message{Type: wire.Elected, Leader: m.Leader, LeaderEpoch: m.LeaderEpoch, Hops: m.Hops})
	}
}

func (r *ring) LeaderLost(env peer.Env, id uint64) {
	if id != env.Self() {
		r.suspected.Suspect(env, id)
	}
	if !r.participant && !env.Now().Before(r.graceEnd) {
		r.initiate(env)
	}
}
