// Package postgres is a [tenure.Store] on a PostgreSQL table, through a
// pgx connection pool. Importing it registers the URL schemes "postgres"
// and "postgresql":
//
//	postgres://user:password@host:5432/db?sslmode=require&tenure_table=tenure_leases
//
// What the URL leaves out comes from libpq's environment variables, as
// with psql: postgres:// alone reaches PGHOST (default: the local socket)
// as PGUSER with PGPASSWORD, database PGDATABASE.
//
// The table (default tenure_leases, see [TableParam]) has one row per key
// and is created on first use, guarded by a transaction-level advisory lock
// so candidates starting at once do not trip over each other. Choose its
// schema with the search_path parameter. The database user needs CREATE on
// the schema the first time, then SELECT, INSERT and UPDATE on the table.
// The published value ([tenure.Publisher]) is kept in the row's value
// column; a table created by an earlier tenure gains that column on first
// use (ALTER TABLE, once, which needs the table's owner).
// The first use also (re)creates a trigger, tenure_notify, that notifies
// watchers of any change to a row's holder, term or token and of any
// deleted row; without the right to create it, watches miss changes made
// outside tenure until the holder's next renewal.
//
// Never DELETE rows or TRUNCATE the table, and never clear or rewrite a
// row's holder by hand: the row's term is the fencing token's counter.
//
// # Guarantees
//
//   - Expiry is judged by the server's clock alone: expiry times are computed
//     in SQL from now() and compared with now(); the client's clock is never
//     consulted. Remaining in a [tenure.Record] is computed by the server.
//   - Acquire is one atomic statement (INSERT ... ON CONFLICT DO UPDATE ...
//     WHERE free or expired), so of candidates racing for a key exactly one
//     wins. Renew and Release are single UPDATEs that match the key, holder,
//     term and a random per-grant token of a live grant; anything else
//     returns an error matching [tenure.ErrLost] and changes nothing.
//   - Terms are the row's counter: each grant gets the previous term plus
//     one. tenure never deletes rows, so terms never go back: not after a
//     release, an expiry, a restart of the server, or a failover to a
//     synchronous standby. They are committed data, as durable as the
//     server is configured to make them. If a row is deleted from outside
//     anyway, a Store still never hands out a term at or below the highest
//     it saw for the key (its own grants, Get, Watch, refusals); a process
//     that never saw the key cannot know and restarts at 1.
//   - A grant cleared or rewritten from outside ends: the holder's Renew
//     returns [tenure.ErrLost], and watchers hear of it through the trigger.
//     A release sets expires_at to NULL; a row whose holder is cleared while
//     expires_at is still ahead vanished, and the next grant's Lease.Wait
//     is what it had left (on the server's clock), so the new holder does
//     not start before the old one can have noticed, but never more than
//     the longer of its TTL and the new grant's, whatever expires_at was
//     written ('infinity' included). A held row whose expires_at was set
//     to NULL is taken over the same way, waiting out a TTL. A deleted row,
//     when the Store saw the key granted, gives a Wait of the last TTL it
//     saw. A released or expired grant needs no Wait; an expires_at moved
//     into the past from outside reads as an expiry.
//   - Watch wakes on LISTEN/NOTIFY: the notification is sent in the
//     transaction that grants, releases or (through the trigger) changes a
//     row from outside, so it arrives when the change
//     commits, typically within a millisecond or two. The store's watches
//     share one LISTEN connection, kept 5 s after the last one ends, so
//     that an elector winning or giving back the key (its campaign's watch
//     ends and its watch of its own grant begins, or the other way round)
//     does not close and open a connection each time. An expiry without a
//     release is delivered when the server-reported remaining time runs out:
//     the watch re-reads the row then, the rule of [tenure.Follow] for every
//     store whose expiries are not announced, so a watch on a held key reads
//     it about once per TTL while the holder renews.
//   - Every call is bounded by its context; no call retries on its own
//     except once when the pool hands out a connection that turns out dead
//     before anything was sent (as after a server restart). The pool
//     reconnects by itself, so a store keeps working after the server comes
//     back, and the LISTEN connection is re-made for the next watch. A
//     connection idle for over a second is checked before use without a
//     round trip (a peek at its socket for the server's close or last
//     message; pgxpool's default is a ping), so that the Release and the
//     waiting candidate's re-read of a handoff cost one round trip each.
//     Each new connection prepares the lease statements and fires the
//     notify trigger once in a transaction it rolls back (on a row of the
//     empty key, never a valid one, so no grant is locked or notified), so
//     that its first grant does not wait for the server to plan those or
//     to compile the trigger's function.
//   - Errors never contain the password of the URL.
//
// # Non-guarantees
//
//   - The lease is only as available as the database: while the server is
//     unreachable nobody can acquire or renew, so the leader steps down at
//     its renew deadline.
//   - After a failover to an asynchronous standby, recently committed grants
//     and terms can be lost; two candidates may then hold the key and a term
//     may be handed out twice. Use synchronous replication (or a single
//     server) if that matters, and fence the resource with the term.
//   - Through a connection pooler in transaction mode (PgBouncer) leases work
//     (add default_query_exec_mode=simple_protocol to the URL if the pooler
//     cannot keep prepared statements) but LISTEN does not: watches fail, and
//     electors fall back to polling.
//   - Watchers use one extra connection per store, open while any watch is;
//     every store listening on a table wakes for every grant and release in
//     that table. Use separate tables for unrelated groups of many keys.
//   - A grant whose Acquire reply was lost (a timeout after the commit) is
//     not known to the caller; it simply expires after its TTL.
//   - The expiry has microsecond resolution; a TTL is cut down to whole
//     microseconds and must be at least one.
//
// # Sessions
//
// A Store is a [tenure.SessionStore]: a process leading many keys through
// one [tenure.Session] sends one keep-alive per interval for all of them.
// The first OpenSession on a table creates a second table, the table's
// name plus _sessions (one row per session: id, TTL, expiry), adds a
// nullable session column to the lease table, with a partial index on it
// (ALTER TABLE and CREATE INDEX, once, under the same advisory lock, which
// needs the table's owner). Stores that never open a session change
// nothing.
//
// Each grant in a session stays an ordinary row of the lease table, with
// its own term, token, holder and value: Acquire, Get, Watch, terms and
// fencing work exactly as for other grants, and the row's expires_at is
// the session's expiry, so Get's Remaining and the expiry a watch waits
// for are the session's. Its token starts with the session's id; the
// session column names the session.
//
//   - KeepAlive is one transaction in one round trip (two statements sent
//     together): it moves the session's expiry to the server's now plus
//     its TTL and copies it to every row still granted in the session,
//     whatever their number. Its reply lists their keys and terms; a grant
//     this process made that is not among them was deleted, rewritten or
//     taken over from outside, and is reported gone. A keep-alive changes
//     no holder, term or token, so it notifies no watcher.
//   - A grant in a session holds the session's row (FOR SHARE) while it is
//     made, and copies its latest expiry; a keep-alive or close takes that
//     row first, then acts on grant rows with a fresh snapshot. So a grant
//     racing a keep-alive is never left with the session's earlier expiry.
//   - Close is likewise one transaction: it deletes the session's row and
//     releases every row still granted in it, notifying watchers as a
//     release does. A session that expires ends its grants at the same
//     instant on the server's clock; watchers see it when the
//     server-reported remaining time runs out, as for any expiry.
//   - A grant deleted or rewritten from outside leaves its expires_at: the
//     next holder's Lease.Wait covers the session's window, as for other
//     grants.
//   - Expired sessions' rows are deleted by the next OpenSession on the
//     table.
//
// A session keeps alive and closes on a connection of its own, apart from
// the pool (one more connection per open session), made by OpenSession
// and re-made after a failure: its keep-alives never queue behind a pool
// busy with thousands of campaigning electors. A grant whose Acquire
// failed without a clear answer (its reply lost after the commit), or
// whose Release failed, may still be held in the session; the next
// keep-alive releases it, so it does not hold its key for the session's
// whole life.
//
// Cost: per keep-alive, one request and one transaction, and on the
// server one row update per grant: idle requests do not grow with the
// number of keys, but the server's work and WAL do, by one small (HOT)
// row update per grant per keep-alive, and the reply carries each grant's
// key and term. Acquire and Release stay one statement per key, through
// the pool. BenchmarkSessionIdle measures it.
//
// Limits: Renew of a session grant through [Store.Renew] extends that grant
// alone, past its session; leave session grants to the session. The
// sessions table grows by one row per session open at once (and expired
// ones until the next OpenSession).
package postgres
