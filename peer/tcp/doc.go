// Package tcp is the authenticated TCP transport of package peer: a
// [Transport] (a [transport.Transport]) that a member's node sends and
// receives through, the observer's [transport.Asker] ([NewAsker]), the
// handshake that proves both ends hold the group's secret, and the secret
// files themselves ([LoadSecret]). It sits between package peer/wire (the
// frames it reads and writes) and package peer (which opens it from a
// URL); it knows nothing of elections: it delivers authenticated messages
// and status queries and writes back the answers it is given.
//
// # Protocol and security
//
// The transport ([Listen]) speaks protocol version 6 (see package
// peer/wire; version 6 added the members' priorities, version 5 the step-down request, version 4 the published value in status replies);
// members and observers of other versions do not interoperate with it:
// their frames are refused with [wire.ErrVersion] naming both versions
// (counted as OtherGroup, and logged once per transport), so upgrade every
// member and observer together.
//
//   - Group keys. The transport never uses the secret directly: it derives
//     a group key from it with HKDF-SHA256 over the URL's key parameter
//     (empty if not given), the algorithm and the sorted member IDs, so one
//     secret file shared by two groups or two keys yields unrelated keys,
//     and frames of one group are refused by the other (counted as
//     OtherGroup: frames carry a public group tag, a hash of the same
//     description).
//   - A handshake on every connection. The dialer sends a fresh 32-byte
//     random nonce, the acceptor its own, the dialer proves it holds the
//     group key with an HMAC-SHA256 over both nonces and both IDs, and only
//     then does the acceptor prove it too (so a stranger who connects
//     receives one random nonce and nothing derived from the secret). A
//     connection must complete its handshake within AuthTimeout (2s);
//     a failed proof closes it (counted as BadMAC).
//   - Every later frame carries the connection's tag and a sequence number
//     (1, 2, 3... per direction) under an HMAC-SHA256 session key derived
//     from the group key and both nonces. A frame recorded on one connection
//     is therefore useless on any other: after either side restarts, on a
//     new connection, in another group. Frames that fail authentication,
//     are malformed, oversized, of another group or connection (Stale), out
//     of sequence (Replayed), or misaddressed are dropped and counted
//     ([Stats]) and their connection closed.
//   - Connections. At most one inbound connection per member: the newest
//     authenticated one wins and the older is closed. Member links carry a
//     keepalive after a quarter of the idle timeout without traffic, so an
//     inbound member connection silent for the idle timeout (4×Timeout, at
//     least 2s) is dead and is closed; observer connections after 30s.
//     Inbound connections are limited to 4 per member; when all are taken,
//     the oldest still in its handshake is evicted, or else the oldest
//     observer connection: neither strangers nor observers can keep
//     members out. A failed Accept (EMFILE...) is retried with backoff.
//   - Frames are authenticated, not encrypted: the epochs and IDs they
//     carry are not secret. A process without the secret can neither join
//     nor win, nor make a member accept anything it recorded.
//
// Secret files ([LoadSecret]) must be readable and writable by their owner
// only (chmod 600) and hold a random secret: one with less than about 96
// bits of estimated entropy (one letter repeated, a short pattern, a short
// alphabet) is refused with an error naming the file and the fix.
//
// Observers use the same handshake, as [wire.ObserverID]; their StatusQuery and
// the member's StatusReply travel as ordinary frames on that connection.
//
// Package peer/memnet is an in-memory transport with seeded faults for tests.
package tcp
