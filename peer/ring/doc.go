// Package ring is the Chang–Roberts ring election for package peer, on the
// ring of member IDs in increasing order (the successor of the highest is
// the lowest), skipping dead successors. Import it for its effect; it
// registers the algorithm "ring":
//
//	import _ "github.com/tenurehq/tenure/peer/ring"
//
// A member that suspects the coordinator (or finds none after starting)
// sends Election carrying its own ID and priority (peer.Config.Priority)
// to its successor. A member receiving Election forwards the better of the
// carried candidate and itself, the higher priority first, then the higher
// ID (it swallows a worse candidate if it already forwarded one:
// Chang–Roberts over that total order); the member that
// receives its own ID back is elected, takes a fresh epoch and sends Elected
// around the ring, which every member adopts and forwards until it returns to
// the coordinator. With one initiator at ring distance d before the highest
// live member, an election takes exactly d + m Election messages and m
// Elected messages on a ring of m live members: 2m at best, 3m−1 at worst.
//
// Every ring message is acknowledged (Ack, counted separately); a successor
// whose Ack does not arrive within two heartbeats, or to which sending
// fails, is marked dead and the message is sent to the next member.
//
// A member of priority 0 never puts itself forward (it forwards the
// others' candidacies and adopts the result): if only such members are
// alive, no election completes and nobody coordinates. Followers send the
// coordinator a heartbeat each interval, carrying their priority.
//
// The ring does not preempt: a recovering member with a higher ID or
// priority follows the current coordinator (a leader's
// tenure.Control.YieldAfter hands over to it). After Release, the former coordinator abstains
// for Timeout (it forwards, but does not put its own ID forward), so another
// member is elected and stays.
//
// Ring assumes a synchronous system: every message arrives within about a
// heartbeat and a silent member has crashed. Under a partition each side
// elects its own coordinator, under different epochs; see package peer.
//
// # Guarantees and non-guarantees
//
// Once failures stop and messages arrive within the assumed bound, every
// live member follows the same coordinator within about Timeout plus a
// round of the ring (two heartbeats per dead member skipped); an election
// whose candidate died on the way is abandoned after 2n hops and retried.
// Which live member wins after such faults is not specified (in a clean
// election, the live member of the highest priority, then the highest
// ID). Two coordinators can exist during a partition; their epochs
// differ and the lower one steps down when it hears of the higher. Fence
// with the epoch.
//
// Without a partition, no two members' leader tasks run at once across
// re-elections: the new coordinator grants its lease only after the
// previous one yielded (its task ended) or, for a crashed one, after its
// silence (package peer, "the handover").
package ring
