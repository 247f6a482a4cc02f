// Package lowest is the "lowest ID" election for package peer: the
// coordinator is the member of the highest priority (peer.Config.Priority)
// among those believed alive, alive meaning heard from within Timeout, and
// among equal priorities the one with the lowest ID; a member of priority
// 0 never stands (if only such members are alive, nobody coordinates).
// Each member's priority travels in its heartbeats. Import it for its effect; it
// registers the algorithm "lowest":
//
//	import _ "github.com/tenurehq/tenure/peer/lowest"
//
// Every member sends a heartbeat to every other member each heartbeat
// interval (n(n−1) messages per interval: meant for small groups). A member
// that finds itself the first live candidate in that order takes a fresh
// epoch and sends Coordinator to all (n−1 messages, or n−2 after the
// coordinator died); a coordinator that hears a candidate before it in
// that order steps down. A starting member
// listens for Timeout before standing, flagging its heartbeats "abstain" so
// the coordinator keeps its place meanwhile. The first in that order always
// preempts: a recovering member of a higher priority (or of the same
// priority and a lower ID) takes over once its start-up wait ends. After
// Release, the former coordinator abstains for Timeout, then takes over
// again.
//
// It assumes a synchronous system (a member silent for Timeout has crashed)
// and the same member list everywhere. Under a partition each side elects
// its own lowest member, under different epochs; see package peer.
//
// # Guarantees and non-guarantees
//
// Once failures stop and every member hears every other within Timeout,
// all live members follow the first live member in that order. Heartbeat traffic grows with
// n², so keep groups small. Two coordinators can exist during a partition
// or a false suspicion; their epochs differ and the lower one steps down
// when it hears of the higher. Fence with the epoch.
//
// Without a partition, no two members' leader tasks run at once: a
// recovering member that takes over grants its lease only after the
// deposed coordinator yielded (its task ended) and a crashed coordinator's
// successor only after its silence (package peer, "the handover").
package lowest
