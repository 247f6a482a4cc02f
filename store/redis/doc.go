// Package redis is a [tenure.Store] on a single Redis server (or a
// primary with replicas), through go-redis. Importing it registers the URL
// schemes "redis" and "rediss" (TLS):
//
//	redis://:password@host:6379/0?tenure_prefix=tenure
//
// A key K lives in three Redis keys: PREFIX:{K}:lease, a hash holding the
// grant with a server-side expiry (PEXPIRE) of the grant's TTL;
// PREFIX:{K}:term, a counter that never expires; and PREFIX:{K}:last, a
// hash that never expires recording the last grant's term, TTL, server-time
// expiry (moved by each renewal) and whether it was released. Acquire,
// Renew, Release and Get are each one Lua script, run atomically by the
// server.
//
// Never delete PREFIX:{K}:term or PREFIX:{K}:last, and never let the server
// evict them. Deleting the lease key ends the grant (see below).
//
// # Guarantees (on one server)
//
//   - Expiry is judged by the server: a grant ends when its lease key
//     expires; Remaining is the server's PTTL. The client's clock is never
//     consulted.
//   - Of candidates racing for a key exactly one wins. Renew and Release
//     check holder, term and a random per-grant token; anything else returns
//     an error matching [tenure.ErrLost] and changes nothing.
//   - Terms come from INCR on the counter, which outlives every lease key,
//     so they grow across releases and expiries; across a restart they
//     survive exactly as far as the server persists: use appendonly yes with
//     appendfsync always for terms that never go back after a crash
//     (everysec can lose the last second, RDB snapshots more).
//   - Watch wakes on pub/sub: the acquire and release scripts PUBLISH on the
//     key's channel, so watchers hear of a change within a round trip. An
//     expiry is delivered through keyspace notifications: at the first
//     Watch the store adds "Kghx" to the server's notify-keyspace-events
//     (keeping what is set), so that an expiry, or a lease key deleted or
//     rewritten by something other than tenure, wakes watchers at once.
//     Whether or not they are on (CONFIG may not be allowed, or the URL may
//     set tenure_keyspace_events=false), a watch also re-reads the key when
//     the server-reported PTTL runs out, the rule of [tenure.Follow] for
//     every store whose expiries are not announced: about one read per TTL
//     while a holder renews.
//   - Every call is bounded by its context (go-redis's own dial, read and
//     write timeouts apply too); failed commands are not retried unless the
//     URL sets max_retries. go-redis reconnects by itself, so a store keeps
//     working once a restarted server is back.
//   - Errors never contain the password of the URL.
//   - Before its first grant a Store reads the server's maxmemory-policy
//     with CONFIG GET and refuses to grant (an error matching
//     [tenure.ErrInvalid] naming the policy) unless it is noeviction, or if
//     CONFIG is refused: with any other policy a full server may evict a
//     lease key (two holders) or a term counter (terms restart at 1). Fix
//     the server with CONFIG SET maxmemory-policy noeviction (and in
//     redis.conf), or, on a managed Redis that hides CONFIG and that you
//     know does not evict, add tenure_eviction_check=skip to the URL.
//     [Store.EvictionCheck] says what was checked; `tenure status` prints it.
//   - A lease key deleted (DEL, eviction) or rewritten from outside ends the
//     grant: the holder's Renew returns [tenure.ErrLost], and watchers see
//     the change at once where keyspace notifications are on. The next
//     grant's Lease.Wait is what was left of the old grant's renew window
//     (from PREFIX:{K}:last, on the server's clock), so the new holder does
//     not start before the old one can have noticed. A grant that expired
//     or was released needs no Wait.
//   - Terms never go back within one Store: it remembers the highest term it
//     saw per key (its grants, Get, Watch, refusals), and if the counter is
//     found at or below it (deleted or evicted) the acquire script moves it
//     past that term ([Store.TermRepairs] counts this). If the last-grant
//     record is gone too, the grant waits the TTL of the last grant the
//     Store saw. A process that never saw the key cannot know: terms it
//     hands out after such a deletion may repeat old ones.
//
// # Non-guarantees: failover, eviction, clocks
//
// Redis replicates asynchronously. If the primary fails after granting a
// lease but before a replica received the grant, the promoted replica does
// not know about it: another candidate can be granted the key while the
// first still believes it leads, so two holders exist until the first one's
// renewal fails (it gets [tenure.ErrLost] at its next renewal, and steps
// down by its renew deadline at the latest). Worse, the term counter on the
// replica may be behind, so the second grant can carry the same term as the
// first or a smaller one than a term already handed out.
//
// Fencing is what protects the resource: pass Lease.Term with every write
// and have the resource reject writes carrying a term below the highest it
// has seen. That works only while terms never go back, so, if you run with
// replicas, either make each grant durable on a replica before relying on
// it (the store does not call WAIT; run a single primary with AOF
// appendfsync always instead), or choose a store with a consensus-backed
// counter (etcd, ZooKeeper, PostgreSQL with synchronous replication) when
// fencing must hold through failovers. We recommend: one Redis primary,
// appendonly yes, appendfsync always, maxmemory-policy noeviction.
//
// Also:
//
//   - With tenure_eviction_check=skip on a server that does evict, a lease
//     key may be evicted before its TTL (the holder notices at its next
//     renewal; the next grant waits) or the term counter may be (see
//     above: terms go back for processes that never saw the key).
//   - Redis stores expiry as wall-clock time: a jump of the server's clock
//     ends or extends grants early or late.
//   - Redis Cluster is not supported (the store uses one node); the hash
//     tags keep a key's lease and counter in one slot for a future version.
//   - A grant whose Acquire reply was lost is not known to the caller; it
//     simply expires after its TTL.
//   - The TTL is rounded down to whole milliseconds and must be at least one.
package redis
