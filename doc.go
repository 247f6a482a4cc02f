// Package tenure elects one leader among replicas that run the same code, and
// runs the leader's work only while it safely leads.
//
// Candidates race for a lease on a key in a [Store]; the winner runs its
// [Task] with a leader context while an [Elector] renews the lease in the
// background. The leader context is cancelled, with a cause, before the
// store can grant the key to anyone else: no later than the start of the
// last successful renewal plus [Config.RenewDeadline], which is shorter than
// the TTL. When the task returns, the lease is released so another candidate
// takes over at once; the elector then campaigns again. [Elector.Do] runs a
// task once. Every grant carries a term ([Lease.Term]), a fencing token that
// only grows; [LeaseFrom] reads it from the leader context.
//
// A candidate may publish a short value with its grant ([Config.Value]: an
// address, or any string up to [MaxValueLen] bytes), so followers can
// route to the leader: the store keeps it with the grant, and [Record.Value]
// (what [Observer]s and watchers see) carries it while the grant is live.
// It is fixed for a term and gone once the grant ends. Stores that can
// publish values are [Publisher]s.
//
// A process that leads many keys (one per partition, tenant or shard)
// shares one [Session] among its electors ([Config.Session]): the store
// then sees one keep-alive per interval for all of them instead of one
// renewal per key, each key keeping its own term. Losing the session ends
// every term in it, with the same deadline as a single elector's. Stores
// that can do this are [SessionStore]s.
//
// With [Config.Control] set, an elector also obeys step-down requests
// ([RequestStepDown]: stop, release, and let a named candidate take over),
// registers as a candidate ([Candidates]) and campaigns with a priority
// ([Control]). It works on any store that serves more than one key and
// publishes values: a request is a grant of the key's [ControlKey].
//
// Stores live in their own packages under store/ (memory, local, etcd,
// postgres, redis, azblob, zk, k8s) and register a URL scheme, so [Open]
// turns a URL into a store. This package imports only the standard library.
//
// # Guarantees
//
//   - At most one candidate holds a live grant of a key at any instant, as
//     judged by the store (each store's package says how it judges expiry).
//   - A leader context is cancelled before the store could regrant the key,
//     provided the elector's clock and the store's clock do not drift apart
//     by more than the safety margin (TTL−RenewDeadline, a third of the TTL
//     by default) over one TTL. Every store request is bounded by a deadline
//     that ends no later than the renew deadline.
//   - Terms strictly increase per key and store, across releases, expiries,
//     takeovers and store restarts.
//   - After a release, waiting candidates of stores that can watch wake at
//     once; otherwise within [Config.RetryInterval] (jittered).
//
// # Non-guarantees
//
//   - Cancellation is cooperative. A task that ignores its context, or a
//     process paused (GC, SIGSTOP, a VM freeze) after it checked its
//     context, can act after its lease went to another candidate. No lease
//     can prevent that; fencing can: send the term with every write and have
//     the resource reject terms lower than the highest it has seen. The
//     `tenure run` command kills its child by the deadline, so a child
//     cannot outlive the lease unless the whole process group is paused.
//   - Clocks: the elector trusts its own monotonic clock to measure durations
//     and the store trusts its own; neither needs synchronized wall clocks,
//     but both must tick at roughly the same rate.
//   - The store is a single point of failure for progress (not for safety):
//     while it is unreachable nobody can be elected, and a leader steps down
//     at its renew deadline.
//   - Which candidate wins is not specified and not fair. With
//     [Config.Control], a higher priority gets a head start, not a
//     guarantee, and a step-down's window is kept only by electors that
//     set Control.
package tenure
