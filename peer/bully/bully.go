package bully

import (
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/wire"
)

func init() { peer.Register("bully", peer.NodeOpener(New)) }

// New returns the Bully algorithm for one node (see the package doc).
func New() peer.Algorithm { return &bully{suspected: peer.Suspicions{}} }

type bully struct {
	graceEnd   time.Time // before it, a starting member listens for a coordinator
	electing   bool
	electStart time.Time
	answered   bool
	answeredAt time.Time
	suspected  peer.Suspicions // higher members believed dead until heard from
}

// prio is id's priority for the election order: what its last message
// said, or, for a member not heard from since this node started, this
// node's own (at least the default), so that among members of equal
// priority the order is the classic one by ID. A member of a higher
// priority not yet heard from is found out when it hears a coordinator
// it outranks and takes over (it bullies), like a recovering higher ID.
func prio(env peer.Env, id uint64) int {
	if p, ok := env.Priority(id); ok {
		return p
	}
	p, _ := env.Priority(env.Self())
	return max(p, tenure.DefaultPriority)
}

// above reports whether a ranks above b: a higher priority, then a higher
// ID.
func above(env peer.Env, a, b uint64) bool {
	return peer.Outranks(prio(env, a), a, prio(env, b), b, true)
}

// answerWait is how long an election waits for an Answer.
func answerWait(env peer.Env) time.Duration { return 2 * env.Config().Heartbeat }

func (b *bully) Start(env peer.Env) { b.graceEnd = env.Now().Add(env.Config().Timeout) }

func (b *bully) Tick(env peer.Env) {
	peer.HeartbeatLeader(env)
	now := env.Now()
	leader, _ := env.Leader()
	switch {
	case env.Abstaining():
		b.electing = false
	case b.electing && !b.answered && now.Sub(b.electStart) >= answerWait(env):
		// Nobody higher answered: they are dead.
		for _, id := range env.Group().IDs() {
			if above(env, id, env.Self()) {
				b.suspected.Suspect(env, id)
			}
		}
		b.becomeCoordinator(env)
	case b.electing && b.answered && now.Sub(b.answeredAt) >= env.Config().Timeout:
		// A higher member answered but never announced itself.
		b.startElection(env)
	case b.electing:
	case leader == 0 && now.Before(b.graceEnd):
		// Starting, it says it is alive: a coordinator whose redials to
		// it backed off while it was down reaches it within the grace,
		// so a recovering member that ranks higher learns of a healthy
		// leader before it would stand (with NoPreempt, it must not
		// depose one).
		for _, id := range env.Group().IDs() {
			if id != env.Self() {
				env.Send(id, wire.Message{Type: wire.Heartbeat})
			}
		}
	case leader == 0:
		b.startElection(env)
	case leader != 0 && leader != env.Self() && above(env, env.Self(), leader) && !env.Config().NoPreempt && !now.Before(b.graceEnd):
		// A lower member coordinates: take over.
		b.startElection(env)
	}
}

func (b *bully) startElection(env peer.Env) {
	if env.Abstaining() {
		return
	}
	b.electing, b.answered, b.electStart = true, false, env.Now()
	sent := 0
	for _, id := range env.Group().IDs() {
		if above(env, id, env.Self()) && !b.suspected.Suspected(env, id) {
			if env.Send(id, wire.Message{Type: wire.Election}) != nil {
				b.suspected.Suspect(env, id) // refused: it is down
				continue
			}
			sent++
		}
	}
	env.Logf("bully: election started, %d higher members asked", sent)
	if sent == 0 {
		b.becomeCoordinator(env)
	}
}

func (b *bully) becomeCoordinator(env peer.Env) {
	b.electing = false
	epoch, err := env.Elect()
	if err != nil {
		env.Logf("bully: cannot become coordinator: %v", err)
		return
	}
	for _, id := range env.Group().IDs() {
		if id != env.Self() && above(env, env.Self(), id) {
			env.Send(id, wire.Message{Type: wire.Coordinator, Leader: env.Self(), LeaderEpoch: epoch})
		}
	}
}

func (b *bully) Receive(env peer.Env, m wire.Message) {
	b.suspected.Clear(m.From)
	switch m.Type {
	case wire.Election:
		if above(env, m.From, env.Self()) || env.Abstaining() {
			return
		}
		env.Send(m.From, wire.Message{Type: wire.Answer})
		if leader, epoch := env.Leader(); leader == env.Self() {
			// Already coordinator: tell the asker instead of re-electing.
			env.Send(m.From, wire.Message{Type: wire.Coordinator, Leader: leader, LeaderEpoch: epoch})
			return
		}
		if _, epoch := env.Leader(); epoch > m.Epoch {
			// The asker's election is about a coordinator that has been
			// replaced since (it was in flight): the new coordinator's
			// heartbeats will reach it; do not start another round.
			return
		}
		if !b.electing {
			b.startElection(env)
		}
	case wire.Answer:
		if b.electing && above(env, m.From, env.Self()) {
			b.answered, b.answeredAt = true, env.Now()
		}
	case wire.Coordinator, wire.Heartbeat:
		// The node adopted the claim if it was current. A member that
		// outranks that coordinator keeps its election going: it takes
		// over once no member above it answers.
		if leader, _ := env.Leader(); leader == m.From && leader != 0 && !above(env, env.Self(), leader) {
			b.electing = false
		}
	}
}

func (b *bully) LeaderLost(env peer.Env, id uint64) {
	if id != env.Self() {
		b.suspected.Suspect(env, id)
	}
	if !b.electing && !env.Now().Before(b.graceEnd) {
		b.startElection(env)
	}
}
