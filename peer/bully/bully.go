package bully

import (
	"time"

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

// answerWait is how long an election waits for an Answer.
func answerWait(env peer.Env) time.Duration { return 2 * env.Config().Heartbeat }

func (b *bully) Start(env peer.Env) { b.graceEnd = env.Now().Add(env.Config().Timeout) }

func (b *bully) Tick(env peer.Env) {
	now := env.Now()
	leader, _ := env.Leader()
	switch {
	case env.Abstaining():
		b.electing = false
	case b.electing && !b.answered && now.Sub(b.electStart) >= answerWait(env):
		// Nobody higher answered: they are dead.
		for _, id := range env.Group().IDs() {
			if id > env.Self() {
				b.suspected.Suspect(env, id)
			}
		}
		b.becomeCoordinator(env)
	case b.electing && b.answered && now.Sub(b.answeredAt) >= env.Config().Timeout:
		// A higher member answered but never announced itself.
		b.startElection(env)
	case b.electing:
	case leader == 0 && !now.Before(b.graceEnd):
		b.startElection(env)
	case leader != 0 && leader < env.Self() && !env.Config().NoPreempt && !now.Before(b.graceEnd):
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
		if id > env.Self() && !b.suspected.Suspected(env, id) {
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
		if id < env.Self() {
			env.Send(id, wire.Message{Type: wire.Coordinator, Leader: env.Self(), LeaderEpoch: epoch})
		}
	}
}

func (b *bully) Receive(env peer.Env, m wire.Message) {
	b.suspected.Clear(m.From)
	switch m.Type {
	case wire.Election:
		if m.From > env.Self() || env.Abstaining() {
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
		if b.electing && m.From > env.Self() {
			b.answered, b.answeredAt = true, env.Now()
		}
	case wire.Coordinator, wire.Heartbeat:
		// The node adopted the claim if it was current.
		if leader, _ := env.Leader(); leader == m.From && leader != 0 {
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
