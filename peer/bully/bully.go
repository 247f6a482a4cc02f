// Package bully is the Bully election algorithm (Garcia-Molina, 1982) for
// package peer: the live member with the highest ID coordinates. Import it
// for its effect; it registers the algorithm "bully":
//
//	import _ "github.com/tenurehq/tenure/peer/bully"
//
// A member that suspects the coordinator (no heartbeat for Timeout), or finds
// none after starting, sends Election to every higher member it does not
// suspect. A higher member that is alive replies Answer and runs its own
// election. A member that gets no Answer within two heartbeats becomes
// coordinator under a fresh epoch and sends Coordinator to every lower
// member; one that got an Answer but no Coordinator within Timeout starts
// over. Messages per election: n−2 at best (the highest live member notices
// first), O(n²) at worst (the lowest does).
//
// A member with a higher ID than the coordinator's that starts or recovers
// takes over at once (it "bullies"), unless the group is configured with
// no-preempt, in which case it follows a healthy coordinator and only
// stands when an election runs. After Release, the former coordinator
// abstains for Timeout (it neither answers nor starts elections), so the
// next highest is elected; without no-preempt it takes over again once the
// abstention ends.
//
// Bully assumes a synchronous system: every message arrives within about a
// heartbeat and a silent member has crashed. Under a partition each side
// elects its own coordinator, under different epochs; see package peer.
package bully

import (
	"time"

	"github.com/tenurehq/tenure/peer"
)

func init() {
	peer.RegisterAlgorithm("bully", func(cfg peer.Config) (peer.Algorithm, error) {
		return &bully{suspected: map[uint64]time.Time{}}, nil
	})
}

type bully struct {
	graceEnd   time.Time // before it, a starting member listens for a coordinator
	electing   bool
	electStart time.Time
	answered   bool
	answeredAt time.Time
	suspected  map[uint64]time.Time // higher members believed dead until heard from
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
				b.suspect(env, id)
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
		if id > env.Self() && !b.isSuspected(env, id) {
			if env.Send(id, peer.Message{Type: peer.Election}) != nil {
				b.suspect(env, id) // refused: it is down
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
			env.Send(id, peer.Message{Type: peer.Coordinator, Leader: env.Self(), LeaderEpoch: epoch})
		}
	}
}

func (b *bully) Receive(env peer.Env, m peer.Message) {
	delete(b.suspected, m.From)
	switch m.Type {
	case peer.Election:
		if m.From > env.Self() || env.Abstaining() {
			return
		}
		env.Send(m.From, peer.Message{Type: peer.Answer})
		if leader, epoch := env.Leader(); leader == env.Self() {
			// Already coordinator: tell the asker instead of re-electing.
			env.Send(m.From, peer.Message{Type: peer.Coordinator, Leader: leader, LeaderEpoch: epoch})
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
	case peer.Answer:
		if b.electing && m.From > env.Self() {
			b.answered, b.answeredAt = true, env.Now()
		}
	case peer.Coordinator, peer.Heartbeat:
		// The node adopted the claim if it was current.
		if leader, _ := env.Leader(); leader == m.From && leader != 0 {
			b.electing = false
		}
	}
}

func (b *bully) LeaderLost(env peer.Env, id uint64) {
	if id != env.Self() {
		b.suspect(env, id)
	}
	if !b.electing && !env.Now().Before(b.graceEnd) {
		b.startElection(env)
	}
}

// suspect marks id dead for Timeout, or until it is heard from: a member
// that recovered is tried again even if it stayed silent.
func (b *bully) suspect(env peer.Env, id uint64) {
	b.suspected[id] = env.Now().Add(env.Config().Timeout)
}

func (b *bully) isSuspected(env peer.Env, id uint64) bool {
	return env.Now().Before(b.suspected[id])
}
