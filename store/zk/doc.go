// Package zk is a [tenure.Store] on Apache ZooKeeper: each grant is an
// ephemeral node owned by a ZooKeeper session of its own, whose session
// timeout is the grant's TTL, so ZooKeeper ends the grant when the holder
// crashes or is cut off. It is also a [tenure.SessionStore]: through a
// [tenure.Session], many grants share one ZooKeeper session (see Sessions
// below).
//
// Importing the package registers the URL scheme "zk" with [tenure.Open]:
//
//	zk://[user:password@]host:port[,host:port...]/path
//
// For a lease key K the store keeps a persistent node PATH/E (E is K with
// every byte outside [A-Za-z0-9_-] written as %XX, so any key is a single
// node name) whose data names the last grant and whose data version counts
// the grants, and, while K is held, the ephemeral node PATH/E/lease and,
// beside the key node, the grant's ephemeral marker PATH/E.sSESSION (see
// below). The path defaults to /tenure. Never delete the key node PATH/E:
// it names the last grant and tells the next one whether it ended
// normally. A user and password in the URL are added to
// every session as "digest" authentication and the store creates its nodes
// with the "auth" ACL, so only that user can change them; credentials never
// appear in errors or logs.
//
// # Guarantees
//
//   - Acquire is one ZooKeeper multi-operation that creates the lease node
//     (failing if it exists) and rewrites the key node, so of concurrent
//     candidates exactly one wins.
//   - The term is the zxid of that transaction (the key node's Mzxid).
//     ZooKeeper zxids grow with every transaction and across restarts and
//     leader elections, so terms strictly increase per key and never go
//     back. They are not consecutive.
//   - A grant ends when its session ends: when the holder releases it,
//     closes the store, stops renewing for a TTL (the store closes the
//     session), or when ZooKeeper expires the session because the holder
//     crashed or was cut off for the session timeout. That expiry is judged
//     by the ZooKeeper server.
//   - Losing the connection ends leadership at once: as soon as a grant's
//     session is disconnected (ZooKeeper "suspended") the store gives the
//     grant up, and Renew returns an error matching [tenure.ErrLost]. A
//     disconnected holder is never reported as still leading (compare
//     apache/curator#980). Its ephemeral node stays until ZooKeeper expires
//     the session, so nobody else can acquire in the meantime.
//   - Release deletes the lease node in a multi-operation that first checks
//     the key node's version (and, read just before, its zxid and that the
//     lease node is the one the grant created: a lease node deleted and made
//     again by hand, say to hold the key during repairs, is left alone, and
//     reads as held by "(unknown)", not by the grant's holder), so
//     it can only delete the grant it was given; Renew checks the key node's
//     version, zxid and child, so Renew and Release of a lease that is not
//     current (superseded, its lease node deleted, its key node rewritten or
//     deleted and created again from outside) return an error matching
//     [tenure.ErrLost] and change nothing. Watches also see the key node
//     rewritten (a data watch beside the lease node's existence watch).
//   - A lease node deleted from outside leaves its grant's session, and so
//     its marker node, alive: the next grant finds the marker (one read,
//     sent beside the acquisition) and carries a Lease.Wait of the old
//     grant's TTL, so the new holder does not start before the old one can
//     have noticed. A released grant deletes its marker with its lease node
//     and an expired one's session takes it along, so neither costs a Wait.
//     So a marker deleted from outside, then its grant's lease node, reads
//     as a release: the next grant carries no Wait. Never delete markers.
//     A record rewritten from outside (to name another session, say) no
//     longer matches the data version its grant wrote into it, so the next
//     grant waits the largest of its TTL, the last the Store saw and its
//     own (records of earlier versions, without that field, are trusted).
//     If the key node itself was deleted, a Store that saw the key granted
//     waits the last TTL it saw, and never reports a term below the highest
//     it saw (terms are zxids, which never go back anyway).
//   - A node created under a key node from outside (with zkCli, say) is not
//     taken for a grant: the key is held while its lease node exists, and
//     Renew finds a lease node deleted beside such a node. Where the key
//     node's stat does not show the lease node as its only child, created
//     by the grant's own write, reading the key costs one more request.
//   - A lease node that no session owns (made by hand without the
//     ephemeral flag) is not a grant, as nothing would ever end it: the key
//     reads free, and the next grant replaces it and waits as above, since
//     a holder whose lease node was replaced may lead until its Renew fails.
//   - Every call is bounded by its context. While ZooKeeper is unreachable
//     calls fail with the context's error (wrapped with the servers); the
//     client reconnects by itself and later calls succeed once it is back.
//   - Watch uses a ZooKeeper existence watch on the lease node and a data
//     watch on the key node, so candidates and observers wake within a
//     round trip of an acquisition, release or expiry. Lease nodes are
//     ephemeral, so ZooKeeper announces every end of a grant and a watch on
//     a held key makes no reads while the holder renews. The lease node's
//     deletion costs the watch no request: the event alone says that the
//     key is free, at the ended grant's term, and the lease node's watch is
//     armed again with the next change of the key node (every grant
//     rewrites it) or after 10 s, which is how late a lease node created
//     from outside without a rewrite of the key node can be seen. Any other
//     change costs one request (the lease node's watch armed again, its
//     answer the new record) or two (the key node rewritten too): the
//     requests that arm the watches are the reads. A grant that a session
//     of the same Store makes in a batch costs the watch none: it delivers
//     the grant from the session's bookkeeping and leaves the key to the
//     session's own watches of the grant until the grant ends or the
//     session's connection drops, then arms its own again. So when a
//     crashed process's keys move to candidates whose own batches win
//     them, their watches send no request at all.
//
// # Non-guarantees
//
//   - A lease can be renewed and released only through the Store that
//     acquired it: the grant lives in that Store's session.
//   - ZooKeeper bounds session timeouts to [minSessionTimeout,
//     maxSessionTimeout] (by default 2 and 20 times tickTime, 4 s and 40 s).
//     A TTL below the minimum is raised by the server: a crashed holder's
//     grant may last until the minimum. A TTL above the maximum is refused
//     with an error matching [tenure.ErrInvalid], since a shorter session
//     could end the grant while its holder still believes it leads.
//   - ZooKeeper expires sessions in buckets of tickTime, so a crashed
//     holder's grant can outlive its TTL by up to one tickTime (2 s by
//     default) before another candidate can acquire the key.
//   - Record.Remaining is the grant's TTL, an upper bound: ZooKeeper does
//     not tell other clients when a session was last heard from.
//   - A grant that is not renewed for its TTL is ended by the holder's own
//     store, measured on the holder's monotonic clock from when the last
//     successful Acquire or Renew was sent; if the holder is gone, ZooKeeper
//     ends it after the session timeout, which it counts from the last
//     message it received from the holder.
//   - Besides its control session, a Store has one session per plain grant
//     it holds (grants in a [tenure.StoreSession] share its one), and, once an Acquire found the key held, one spare session made
//     ready for its next attempt, so that taking over a released key costs
//     two round trips.
//   - Every candidate watching a key wakes when it changes (no predecessor
//     chain): fine for the handful of candidates an election has.
//
// # Sessions
//
// A [tenure.StoreSession] of this store is one ZooKeeper session, on one
// connection of its own, with the session timeout set to the session's
// TTL; every grant made in it is an ephemeral lease node (and marker) of
// that session, laid out and numbered exactly as plain grants are, so Get,
// Watch and other stores see no difference (TTL and Remaining are the
// session's TTL). A process leading a thousand keys through a
// [tenure.Session] holds two connections (the store's control session and
// the shared session) instead of a thousand, so ZooKeeper's default limit
// of 60 connections per client address (maxClientCnxns) no longer caps it.
//
//   - Cost: KeepAlive is one request, a sync on the session's connection,
//     whatever the number of grants; the client also pings every third of
//     the session timeout, as every ZooKeeper client does. An idle session
//     thus costs about 6/TTL requests per second (0.6 at a TTL of 10 s),
//     plus the control session's 0.3: measured at 0.8 requests/s for 1, 100,
//     1,000 and 10,000 grants (BenchmarkSessionIdle), under 0.1 % of a core
//     and 21 MiB of heap at 10,000. Acquire costs a read, one
//     multi-operation and two watch-setting reads sent together; Release a
//     read and one multi-operation. A batch of Acquires (AcquireBatch)
//     costs a pipelined read per key (none for a key whose node a watch of
//     the same Store read and has seen no change of since), one
//     multi-operation for all, and the two watch-setting reads per grant,
//     sent after the batch returned while the next one is made. At most 64 of them are under way per
//     session at once (the others wait their turn, bounded by their
//     contexts), so that a burst of campaigns does not queue on the
//     connection ahead of the keep-alives: a process campaigning for 10,000
//     keys at once leads them all within seconds to tens of seconds,
//     depending on the machine, without losing its session.
//   - Gone grants: each grant has a data watch on its key node and one on
//     its lease node, on the session's connection (held by the server, no
//     requests while nothing changes). ZooKeeper delivers a watch event
//     before the answer to any request it handles later on that connection,
//     and the sync makes the server catch up with the ensemble first, so a
//     KeepAlive reports every grant deleted, rewritten or superseded from
//     outside before it was sent. A batch's grants are returned before their
//     watches are set: each watch-setting read compares what it reads with
//     the grant, and KeepAlive waits for those watches before it syncs, so
//     this holds for them too; a grant whose watches cannot be set is
//     reported gone. The marker of a grant deleted from outside
//     stays until a KeepAlive reported it, so the next holder's Lease.Wait
//     covers the session's window, as for plain grants.
//   - The session ends, with every grant in it: on Close (at once: closing
//     the ZooKeeper session deletes its nodes); when no KeepAlive succeeded
//     for the TTL, counted on the holder's monotonic clock from when the
//     last one (or OpenSession) was sent (the store closes it); and when
//     ZooKeeper expires it because the process crashed or was cut off for
//     the session timeout, counted from the last packet the server received
//     (a KeepAlive or a ping). Later calls return an error matching
//     [tenure.ErrLost]. A disconnection alone does not end it: the client
//     reconnects within the session timeout and the session lives on, while
//     KeepAlive fails with a timeout, so the [tenure.Session] counts down to
//     its renew deadline.
//   - The TTL follows the rules of plain grants: above the servers'
//     maxSessionTimeout it is refused with [tenure.ErrInvalid], below their
//     minSessionTimeout it is raised by them (a crashed process's grants
//     last until the minimum), and expiry is judged in buckets of tickTime.
//   - An Acquire whose answer is lost (a timeout after the request was sent)
//     may have made the grant: the next Acquire of the key in the session
//     takes it up, and otherwise the store deletes it in the background.
//   - After a reconnection the client sets its watches again, and
//     ZooKeeper fires those whose nodes changed meanwhile, but nothing says
//     when that is done; so the store reads every grant's two nodes again,
//     setting their watches itself (two reads per grant, once per
//     reconnection), and KeepAlive waits for that before it syncs: a grant
//     taken away while the connection was down is reported by the first
//     KeepAlive that succeeds after it. That took 2.6 s for 10,000 grants
//     on a loaded 2-core machine: with many grants and a short TTL, a
//     reconnection can outlast the renew deadline and end the session.
package zk
