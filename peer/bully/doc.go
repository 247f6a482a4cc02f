// Package bully is the Bully election algorithm (Garcia-Molina, 1982) for
// package peer: the live member of the highest priority
// (peer.Config.Priority) coordinates, and among equal priorities the one
// with the highest ID; "higher" below means that order. A member of
// priority 0 never stands: it neither answers nor starts elections, so if
// only such members are alive nobody coordinates. A member learns another's
// priority from its messages; one not heard from yet is taken to have this
// member's own priority (the classic order by ID), and if it ranks higher
// after all it takes over on hearing the coordinator, as a recovering higher
// member does. Followers send the coordinator a heartbeat each interval,
// carrying their priority. Import it
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
// A member ranked higher than the coordinator that starts or recovers
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
//
// # Guarantees and non-guarantees
//
// Once failures stop and messages arrive within the assumed bound, every
// live member follows the same coordinator within about Timeout plus a few
// heartbeats: the highest-ranked live member (without no-preempt), and epochs only
// grow. Nothing stops two coordinators during a partition or a false
// suspicion; their epochs differ and the lower one steps down when it hears
// of the higher. Fence with the epoch.
//
// Without a partition, no two members' leader tasks run at once, whether a
// higher member bullies its way in or an election follows a suspicion: the
// new coordinator grants its lease only after the deposed one yielded (its
// task ended) or, for a crashed one, after its silence (package peer, "the
// handover").
package bully
