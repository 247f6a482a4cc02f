package lowest

import (
	"time"

	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/wire"
)

func init() { peer.Register("lowest", peer.NodeOpener(New)) }

// New returns the "lowest ID" algorithm for one node (see the package doc).
func New() peer.Algorithm { return &lowest{} }

type lowest struct {
	graceEnd time.Time
}

func (l *lowest) Start(env peer.Env) { l.graceEnd = env.Now().Add(env.Config().Timeout) }

func (l *lowest) waiting(env peer.Env) bool { return env.Now().Before(l.graceEnd) }

func (l *lowest) Tick(env peer.Env) {
	self := env.Self()
	leader, epoch := env.Leader()
	if leader != self {
		// The node sends the coordinator's heartbeats; the others say they
		// are alive here.
		var flags uint8
		if l.waiting(env) {
			flags = wire.FlagAbstain
		}
		for _, id := range env.Group().IDs() {
			if id != self {
				env.Send(id, wire.Message{Type: wire.Heartbeat, Flags: flags, Leader: leader, LeaderEpoch: epoch})
			}
		}
	}
	if l.waiting(env) {
		return
	}
	best := l.best(env)
	switch {
	case best == self && leader != self:
		e, err := env.Elect()
		if err != nil {
			env.Logf("lowest: cannot become coordinator: %v", err)
			return
		}
		for _, id := range env.Group().IDs() {
			if id != self && env.Alive(id) {
				env.Send(id, wire.Message{Type: wire.Coordinator, Leader: self, LeaderEpoch: e})
			}
		}
	case best != self && leader == self:
		env.StepDown()
	}
}

// best is the live member standing for election that ranks first, or 0:
// the highest priority, then the lowest ID (see [peer.Outranks]). A member
// of priority 0 abstains for good, so it never is.
func (l *lowest) best(env peer.Env) uint64 {
	var best uint64
	bestPrio := 0
	for _, id := range env.Group().IDs() {
		standing := env.Alive(id) && !env.Abstains(id)
		if id == env.Self() {
			standing = !env.Abstaining()
		}
		if !standing {
			continue
		}
		p, _ := env.Priority(id)
		if best == 0 || peer.Outranks(p, id, bestPrio, best, false) {
			best, bestPrio = id, p
		}
	}
	return best
}

func (l *lowest) Receive(env peer.Env, m wire.Message) {}

func (l *lowest) LeaderLost(env peer.Env, id uint64) {}
