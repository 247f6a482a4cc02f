// Package shard spreads K keys over the live members of a group, so that
// each of n live members leads ⌊K/n⌋ or ⌈K/n⌉ of them, and moves keys when
// members join or leave with the guarantee of every tenure lease: a key's
// old leader's task has stopped before its new leader's task starts.
//
// Each member runs a [Sharder]. It holds a liveness lease on
// Group/members/<Identity> for as long as its Run runs, and follows the
// liveness keys of every member listed in [Config.Members]: a member is
// live while the store shows a grant of its liveness key to it. From that
// live set every member computes, for each key, the same owner by
// rendezvous hashing with bounded loads ([Assign]), with no messages
// between members. The
// owner campaigns for the key's lease, Group/keys/<key>, through an
// ordinary [tenure.Elector] and runs the [Task] while it leads.
//
// # Membership: a static list, no coordinator
//
// A [tenure.Store] cannot list keys, so a member cannot discover unknown
// members. Instead every member is given the same list of possible
// members (like the ordinals of a StatefulSet), and only liveness is
// dynamic. The trade-off: adding a member that is not on the
// list means restarting the group with a longer list (members with
// different lists compute different owners; the leases keep that safe,
// but keys can bounce until the lists agree). On a store that publishes
// values each member publishes a fingerprint of its members and keys
// with its liveness grant, and a member that sees another fingerprint
// logs a warning, once per fingerprint. In exchange there is no
// coordinator to elect, no single member whose failure stalls
// rebalancing, and a member's view of the group costs one watch per
// listed member.
//
// # Moving a key
//
// When the live set changes, a member that no longer owns a key cancels
// that key's task, waits for it to return and releases the lease (or, if
// it crashed, the lease expires after its TTL). The new owner campaigns
// like any candidate: it is granted the lease only once the old grant
// ended, and its task starts only then. A join moves about K/(n+1) keys
// to the newcomer and a leave the leaver's keys (about K/n) to the
// others, plus, for the bounds to hold, a few more: about 20 % more keys
// move than with plain rendezvous hashing, whose loads vary as a random
// draw's (see [Assign]).
//
// # When the owner does not take a key: the fallback rule
//
// Views of the live set can differ for a moment (each member learns of a
// change through its own watch), and a member can be live yet unable to
// take a key. So that a key never stays unled because of a stale view, a
// member ranked r ≥ 1 for a key ([Rank]) campaigns for it when the key
// has stayed unled for r × [Config.Takeover] (default 2 × TTL) while its
// view of the live set did not change. The lower-ranked a member, the
// longer it waits, so normally the runner-up alone steps in. Such a
// fallback leader gives the key back (cancels, releases) as soon as its
// view of the live set changes, or after [Config.Reclaim] (default 10 ×
// TTL) at the latest, so a key taken by the fallback rule returns to its
// owner once the owner can take it; a fallback candidate that sees
// another member take the key stops campaigning at once. Either way, only the lease decides
// who leads: the fallback rule affects balance, never safety.
//
// # Cost
//
// Each member keeps one watch per listed member and one per key (as a
// candidate or leader through the key's elector, or through an
// [tenure.Observer] while it waits to see whether the owner takes the
// key), and four to five goroutines per key and member, by store: 1,032
// (memory store) to 1,309 (local store) for 4 members × 64 keys in one
// process without a session. A change of the live set costs every
// member one read per key it does not own. On stores where a watch is a
// server-side stream (etcd, ZooKeeper), size K with that in mind.
//
// # Guarantees and non-guarantees
//
//   - Per key, the guarantees of [tenure.Elector]: at most one live grant
//     at a time, the task stopped before another member can be granted the
//     key, terms that only grow (use them as fencing tokens).
//   - A key is led within about one TTL after its leader crashed, at once
//     (one watch delivery plus one Acquire) after it left gracefully, and
//     within Takeover × rank after its owner failed to take it.
//   - Balance is exact when every member sees the same live set: each
//     owns ⌊K/n⌋ or ⌈K/n⌉ keys ([Assign]). While views differ, or while
//     the fallback rule lets a runner-up hold a key, a member can lead
//     more or fewer.
//   - Members must share Group, Members, Keys and the store. Lease names
//     of different groups never collide: [CheckGroup] refuses the group
//     names that could. A member not
//     live in its own view (its liveness lease not yet granted, or lost)
//     leads nothing: it gives up every key it led, as on a leave.
package shard
