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
// The lease hash names its format (field format, 1; absent in grants of
// builds before it, which read as format 1). A lease hash of another
// format, or without a holder field, is one this build cannot read: it
// may be a live grant of a newer tenure, so Acquire, Get and Watch fail
// with an error naming the key and the format instead of taking the key
// for free, until the hash is gone (released, expired or deleted).
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
//     key's channel, so watchers hear of a change within a round trip. All
//     watches of a Store share one subscription connection, so a process
//     campaigning for thousands of keys opens one, not thousands (the
//     server's default maxclients is 10,000); if it fails, every watch on
//     it ends and its caller watches again. An
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
//     not start before the old one can have noticed, and never more than
//     the longest TTL the script knows of, whatever expiry was written there.
//     A grant that expired or was released needs no Wait. A lease key
//     replaced by a value of another type ends the grant the same way, and
//     Get and Acquire fail with an error naming the key and the Redis key.
//     A lease key whose expiry was removed (PERSIST) or pushed beyond its
//     TTL is given back its TTL by the next Acquire or Get that reads it,
//     so it cannot outlive a holder that stopped renewing by more than that.
//   - Terms never go back within one Store: it remembers the highest term it
//     saw per key (its grants, Get, Watch, refusals), and if the counter is
//     found at or below it (deleted or evicted) the acquire script moves it
//     past that term ([Store.TermRepairs] counts this). If the last-grant
//     record is gone too, the grant waits the TTL of the last grant the
//     Store saw. A process that never saw the key cannot know: terms it
//     hands out after such a deletion may repeat old ones.
//   - Terms stop at 2^53-1, the largest integer the server's Lua scripts
//     count exactly: a counter or term written past it from outside makes
//     Acquire fail with an error rather than grant a term that repeats or
//     goes back.
//
// # Sessions
//
// A Store is a [tenure.SessionStore]: [tenure.Session] keeps every grant
// of a process alive with one request per renew interval, whatever their
// number. A session is a hash PREFIX:session:ID expiring (PEXPIRE) ttl
// after the server ran the last OpenSession or KeepAlive, holding the name
// and token of each of its grants' lease keys. A grant of K in a session
// is K's ordinary lease key without an expiry of its own, naming the
// session's key: it is held exactly while that key exists. Acquire, Get,
// Release and watches judge it so, and report the session's TTL and the
// server's PTTL of the session's key as its TTL and Remaining, so to
// everybody else it is a grant like any other. Terms come from the same
// counter as plain grants.
//
//   - OpenSession, KeepAlive and Close are one script each; Acquire and
//     Release one per grant, as for plain grants. KeepAlive writes two keys
//     (the session's expiry, and PREFIX:session:ID:exp recording it)
//     whatever the number of grants, so the append-only file and replicas
//     see two writes per interval, not one per grant.
//   - KeepAlive also reads one field of every grant's lease key, so that a
//     grant deleted or rewritten from outside (DEL, HSET, a key of another
//     type) is reported gone by the very next keep-alive, as a plain
//     grant's Renew would fail. That read is the server's only work that
//     grows with the number of grants: measured 1.8 to 12 µs of server
//     time per grant on a shared 2-core machine under load, so 10,000
//     grants cost 18 to 120 ms of server time per keep-alive (under 2 % of
//     a core with a 10 s TTL), during which the single-threaded server
//     serves nobody else. Redis's INFO counts each of these reads in
//     total_commands_processed; the client sends one request. Beyond a few
//     tens of thousands of grants, use several sessions (several
//     [tenure.Session]) or a longer TTL.
//   - Close releases every grant still in the session at once: each lease
//     key is deleted and the release published, so watchers see it within
//     a round trip. A session that expires (its process stopped) is not
//     announced: watchers re-read when the Remaining they were given runs
//     out, which is the session's expiry, keyspace notifications or not.
//     Its grants' lease keys stay behind, counted as free, until the next
//     grant of their key replaces them.
//   - If a grant's lease key, or the session's key itself, is deleted from
//     outside, the next grant of the key waits out what was left of the
//     session's renew window (PREFIX:session:ID:exp outlives the session
//     by a TTL for that), as for plain grants; a deleted session key ends
//     every grant in it, and the next keep-alive returns [tenure.ErrLost].
//     If that expiry key is gone too (deleted with the session's key, or
//     the session ended over a TTL before the key is taken), the next grant
//     waits a whole TTL: nothing tells the two apart.
//   - Across a crash of a server with appendfsync always, a session and its
//     grants survive with their server-time expiry; a server that lost its
//     data makes the next keep-alive return [tenure.ErrLost].
//   - A session's scripts touch keys of many hash slots, including keys
//     named inside the data rather than passed as KEYS (the lease keys of
//     its grants, and a grant's session key), which a single server allows
//     and Redis Cluster does not: OpenSession refuses a server in cluster
//     mode (INFO cluster) with an error wrapping [errors.ErrUnsupported].
//     An ACL user needs access to PREFIX:* only, as for plain grants.
//   - A grant made by an Acquire that failed without knowing (its ctx
//     ended or the connection broke after the script was sent) would live
//     as long as the session with nobody knowing of it, keeping its key
//     from every candidate, the one that asked included: the session
//     remembers such Acquires, and its next keep-alives (the same single
//     request) release their grants if they exist.
//   - Store.Renew of a session grant returns [tenure.ErrLost]: its session
//     renews it.
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
//     tags keep a key's lease and counter in one slot for a future version,
//     but sessions need one server (see above).
//   - A grant whose Acquire reply was lost is not known to the caller; it
//     simply expires after its TTL.
//   - The TTL is rounded down to whole milliseconds and must be at least one.
package redis
