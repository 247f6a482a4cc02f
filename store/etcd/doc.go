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
//   - A grant ends only when its etcd lease ends (expiry, or Release, which
//     checks the holder key and then revokes the lease, deleting the key
//     with it), and a holder key is only ever created where none exists. So
//     while a grant's lease lives, the holder key is that grant: Renew of a
//     grant made by the same Store is a single lease keep-alive. Renew of a
//     lease from elsewhere, and every Release, first check that the holder
//     key still carries the grant's revision, etcd lease and identity; a
//     renewal or release by anyone else, or after a takeover, returns an
//     error matching [tenure.ErrLost] and changes nothing.
//   - Idle cost: a leader renews with one keep-alive per renewal; a waiting
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
//   - The store's prefix must be tenure's alone: a holder key deleted or
//     rewritten by another program would void the reasoning above.
//   - An etcd leader change or restart extends outstanding leases (etcd
//     restarts their TTL on the new leader). A crashed holder's grant may
//     then last up to one more TTL. It never ends early.
//   - The term key stays in etcd after the key is released (a few bytes per
//     lease key ever granted). It only lets Get report the last term of a
//     free key; terms come from etcd's cluster-wide revision and keep
//     growing even if it is deleted.
//   - TLS is not configurable through the URL; use an etcd reachable over
//     a trusted network or a local proxy.
//   - Without credentials, Open does not contact etcd (the first call does);
//     with credentials it authenticates, bounded by its context.
package etcd
