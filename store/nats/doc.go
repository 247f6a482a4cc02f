// Package nats is a [tenure.Store] on a NATS JetStream key-value bucket,
// through nats.go. It needs nats-server 2.11 or later (per-message TTLs).
// Importing it registers the URL scheme "nats":
//
//	nats://[user:password@]host:port[,host:port...]/BUCKET[/PREFIX]
//
// BUCKET and PREFIX (default [DefaultPrefix]) are 1 to 64 of A-Z a-z 0-9 _
// and -; stores with different buckets or prefixes are separate lease
// namespaces. There are no query parameters; TLS, tokens, NKeys and
// credentials files are not supported by the URL.
//
// # The bucket
//
// On first use the store opens BUCKET, creating it if it does not exist
// with history 1, file storage, one replica, no bucket TTL and
// LimitMarkerTTL [MarkerTTL] (which turns per-key TTLs on). A bucket that
// exists without per-key TTLs, with a history above 1 (the server then
// stretches every TTL to at least LimitMarkerTTL) or with a bucket TTL is
// refused with an error matching [tenure.ErrInvalid] saying what to
// change. A bucket you create yourself (for more replicas, say) needs the
// same options.
//
// A key K lives in two NATS keys: PREFIX.B, where B is K in unpadded
// base64url (tenure keys may hold any character, NATS keys only a few),
// holding the grant as JSON; and PREFIX.B.w, the TTL window: the longest
// TTL ever granted for K, raised before the first grant of a longer TTL
// and never lowered.
//
// # Guarantees (on one server)
//
//   - Expiry is judged by the server: a grant is written with a per-message
//     TTL (the header Nats-TTL) and the server deletes it when that runs
//     out, leaving a marker (Nats-Marker-Reason: MaxAge) for
//     [MarkerTTL]. The server keeps these TTLs in whole seconds and
//     truncates: measured on nats-server v2.15.2, an entry written with
//     TTL 2 s was deleted 2.001 s after the write, one with TTL 1.5 s after
//     1.0 s. So the store writes the TTL rounded up to whole seconds, and a
//     grant never ends on the server before its holder's TTL; a crashed
//     holder's key frees after its TTL rounded up to the next second
//     (crash failover at TTL 2 s: 2.00 s median, 2.17-2.18 s p99, in
//     BenchmarkFailover). Remaining is that server TTL less the time since
//     the server stamped the last write, by this process's clock (the
//     whole server TTL when the clocks disagree).
//   - Every write is conditional on the key's latest message (the header
//     Nats-Expected-Last-Subject-Sequence, as KV Update does): of racing
//     candidates exactly one writes the grant, and a Renew writes a new
//     message with a new TTL only over its own grant (holder, term, random
//     token and TTL all match). Renew and Release are one request, a
//     write conditional on the sequence of the Store's own last write of
//     the grant; when that fails (or another Store made the grant) they
//     read the key and write again if it still is the grant. Anything
//     else gives [tenure.ErrLost] and changes nothing.
//   - The term is the stream sequence of the grant's first write. It only
//     grows while the bucket lives: across releases, expiries, keys
//     deleted or purged with the NATS client, the stream purged, and
//     server restarts (tested, also after the stream was purged empty).
//     Terms are not consecutive: every write to the bucket, renewals
//     included, takes a sequence number. A Store remembers the highest
//     term it saw per key and refuses ([tenure.ErrTermsExhausted]) to hand
//     out one not above it, which only a bucket deleted and made again can
//     cause.
//   - A grant deleted or purged from outside (kv.Delete, kv.Purge) ends:
//     its holder's Renew returns [tenure.ErrLost], watchers see it at
//     once, and the next grant's Lease.Wait covers the rest of the old
//     holder's renew window, judged by the key's TTL window (and by the
//     TTLs this Store saw), so the new holder does not start before the
//     old one can have noticed. A grant that expired or was released needs
//     no Wait. A key whose messages are all gone (its marker aged out, the
//     stream purged) after this Store saw it granted waits the same way.
//   - A grant written from outside without a TTL (kv.Put of a value that
//     decodes as a grant), or with a longer server TTL than tenure writes
//     for the TTL it names, may outlive that TTL on the server: it reads
//     as held by whoever it names until this Store has seen that revision
//     unchanged for its TTL plus 2 % + 20 ms, on its own monotonic clock,
//     and the next grant then waits that TTL. It is never renewed.
//   - A value that is not a tenure grant, or a live grant whose term is
//     below one this Store saw, makes Get and Acquire fail with an error
//     naming the key, its NATS key and revision (never a free key or a
//     lower term), and the holder's Renew return [tenure.ErrLost].
//   - Watch is a key-value watch on the grant's NATS key: every write,
//     expiry marker, delete or purge wakes it and it reads the key once.
//     Expiries are announced by the server's marker; a watch also reads
//     the key when a held record's Remaining has passed (a grant written
//     from outside without a TTL ends by observation only). While the
//     holder renews, a watch costs one read per renewal.
//   - The client connects in the background from [Open] on and reconnects
//     without end. A call waits at most 2 s (or until its ctx is done) for
//     a connection, then fails naming the server and the last connection
//     error; nothing is buffered while disconnected, and a call under way
//     when the connection is lost ends at once, as do the watches on it.
//   - Errors never contain the password of the URL.
//
// # Non-guarantees
//
//   - Deleting the bucket (its stream KV_BUCKET) resets the stream's
//     sequence, and with it the terms: a process that never saw a key may
//     then hand out a term it handed out before. Deleting PREFIX.B.w makes
//     the next grant after a grant deleted from outside wait only the TTLs
//     its Store knows of.
//   - Expiry is computed by the server from the message's timestamp,
//     wall-clock time: a jump of the server's clock ends grants early or
//     late.
//   - Only a single server was tested. In a cluster, writes go through the
//     stream's leader and are acknowledged once replicated to a quorum, but
//     reads use the stream's direct get, which a replica that lags may
//     answer: a Get may then show an older record (Acquire's conditional
//     write still fails on it rather than grant twice).
//   - A grant whose Acquire reply was lost is not known to the caller; it
//     simply expires after its TTL.
//   - The marker a delete or purge leaves carries no term: to a process
//     that never saw the key, it then reads as free at term 0 (the terms
//     handed out still grow).
//   - Sessions ([tenure.SessionStore]) are not supported: [tenure.NewSession]
//     returns an error wrapping [errors.ErrUnsupported].
package nats
