package postgres

import (
	"context"
	"crypto/tls"
	"net"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// pingIdle is how long a pooled connection must have been idle before
// pgxpool checks it: pgx's own default.
const pingIdle = time.Second

// shouldPing is the pool's ShouldPing. pgxpool's default pings every
// connection idle for over pingIdle before handing it out: one more round
// trip, and on a handoff's path twice, since the leader's Release comes a
// renewal interval after its last call and a waiting candidate's re-read
// after a long wait. A connection the server ended (a restart,
// pg_terminate_backend, idle_session_timeout, a pooler's timeout) has an
// end of file, a reset or the server's last message waiting in its
// socket, which a non-blocking peek sees without a round trip: only such
// a connection, or one that cannot be peeked at, is pinged (and a failed
// ping makes the pool open another). One whose network path died silently
// passes the peek, as it would have hung the ping until the call's
// deadline, which is what the call itself now does.
func shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	if p.IdleDuration <= pingIdle {
		return false
	}
	return !quiet(p.Conn.PgConn().Conn())
}

// quiet reports whether c's socket is open and has nothing to read: no
// data, no end of file, no error. It peeks under the descriptor's
// reference only (RawConn.Control), not its read lock (RawConn.Read): pgx
// can leave its background reader blocked in a read of an idle connection
// after a write that took over 15 ms, and waiting for that lock would
// hang the call that asked for the connection until the server sent
// something, which an idle server never does.
func quiet(c net.Conn) bool {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	if err := raw.Control(func(fd uintptr) { open = peekNothing(fd) }); err != nil {
		return false
	}
	return open
}
