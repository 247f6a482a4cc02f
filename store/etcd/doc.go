// Package etcd is a [tenure.Store] on an etcd v3 cluster: each grant is an
// etcd lease, and the key that names the holder is attached to it, so etcd
// itself deletes the key when the lease expires.
//
// Importing the package registers the URL scheme "etcd" with [tenure.Open]:
//
//	etcd://[user:password@]host:port[,host:port...]/prefix
//
// The prefix (default /tenure) names the etcd keys the store uses: for a
// lease key K, PREFIX/holder/K (attached to the grant's etcd lease) and
// PREFIX/term/K (persistent, remembers the last term once the holder key
// is gone). A user and password in the URL authenticate to etcd; they never
// appear in errors or logs.
//
// # Guarantees
//
//   - Expiry is judged by etcd's lease mechanism on the etcd leader, never by
//     the client's clock. An etcd lease TTL is a whole number of seconds, so a
//     TTL is rounded UP to the next second (and to etcd's minimum lease TTL,
//     at least 1 s): a grant never ends before its TTL, but a crashed holder's
//     grant may last up to a second longer than asked, plus the up to 500 ms
//     etcd takes to notice an expired lease. Lease.TTL and Record.TTL report
//     the TTL asked for.
//   - Terms are the etcd revision of the grant (the holder key's
//     CreateRevision). Revisions grow with every write to the cluster and are
//     persisted, so terms strictly increase per key, including across etcd
//     restarts and leader changes. They are not consecutive.
//   - Acquire is a single etcd transaction that creates the holder key only
//     if it is absent: of concurrent candidates exactly one wins.
//   - Renew sends, together (one round trip), a keep-alive of the grant's
//     etcd lease and a transaction that compares the holder key with the
//     grant (its revision, etcd lease and value). If the holder key was
//     deleted or rewritten (by anything, tenure or not), or the etcd lease
//     ended, Renew returns an error matching [tenure.ErrLost]. Release
//     checks the holder key the same way in the transaction that deletes
//     it; a renewal or release by anyone else, or after a takeover, returns
//     an error matching [tenure.ErrLost] and changes nothing.
//   - The term key records the last grant: its holder, TTL, etcd lease and
//     whether it was released. When a grant ended without release while its
//     etcd lease still lives (the holder key deleted from outside), the next
//     grant's Lease.Wait covers what is left of that lease, so the new
//     holder does not start before the old one can have noticed; the
//     orphaned lease is revoked. If the term key is gone too, a handle that
//     saw the key granted waits the TTL of the last grant it saw.
//   - A holder key rewritten by a plain etcdctl put loses its etcd lease and
//     would never expire, leaving the key without a leader for good once
//     its holder stopped. The next Acquire that finds such a key puts it
//     back under a lease of the TTL it records (its own TTL if that is not
//     one tenure grants), so it is free within that TTL.
//   - Idle cost: a leader renews with one keep-alive and one compare-only
//     transaction (a linearizable read) per renewal; a waiting
//     candidate's watch costs nothing until the key changes; an acquisition
//     is a lease grant plus one transaction.
//   - Every call is bounded by its context. While etcd is unreachable calls
//     fail with the context's error (wrapped with the endpoints); the client
//     reconnects by itself and later calls succeed once etcd is back.
//   - Watch uses an etcd watch on the holder key, so candidates and
//     observers wake within one round trip of an acquisition, release or
//     expiry.
//
// # Non-guarantees
//
//   - Record.Remaining from Get comes from etcd's lease TimeToLive, which
//     has whole second resolution, and is reported as an upper bound (at
//     most the rounded-up TTL); in a HeldError and in watch deliveries it is
//     the holder's rounded-up TTL.
//   - The store's prefix should be tenure's alone. A holder key deleted or
//     rewritten by another program ends the grant (see above), but an etcd
//     lease revoked from outside (etcdctl lease revoke) cannot be told from
//     an expiry: the next grant carries no Wait, and only the old leader's
//     watch of its key (see [tenure.Elector]) ends its task, within a round
//     trip, while the new one may already have started.
//   - An etcd leader change or restart extends outstanding leases (etcd
//     restarts their TTL on the new leader). A crashed holder's grant may
//     then last up to one more TTL. It never ends early.
//   - The term key stays in etcd after the key is released (a few bytes per
//     lease key ever granted). Never delete PREFIX/term/K: it lets Get report
//     the last term of a free key and tells Acquire whether the last grant
//     ended normally. Terms come from etcd's cluster-wide revision, so they
//     keep growing even if it is deleted (they go back only if etcd itself
//     is restored from an older backup); Get and Watch never report a term
//     below the highest the handle saw.
//   - TLS is not configurable through the URL; use an etcd reachable over
//     a trusted network or a local proxy.
//   - Without credentials, Open does not contact etcd (the first call does);
//     with credentials it authenticates, bounded by its context.
package etcd
