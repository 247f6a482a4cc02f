package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenurehq/tenure"
)

// PreparedOnIdle returns, for each idle connection of s's pool, how many of
// the store's four lease statements the server holds prepared for it.
func PreparedOnIdle(ctx context.Context, s *Store) ([]int, error) {
	var out []int
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		var n int
		err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE statement = ANY($1)`,
			[]string{s.q.acquire, s.q.renew, s.q.release, s.q.get}).Scan(&n)
		c.Release()
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// IdleConnChecks returns, for each idle connection of s's pool, its
// backend's PID and whether the pool would ping it after PingIdle and more
// of idleness.
func IdleConnChecks(ctx context.Context, s *Store) (pids []uint32, ping []bool) {
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		pids = append(pids, c.Conn().PgConn().PID())
		ping = append(ping, shouldPing(ctx, pgxpool.ShouldPingParams{Conn: c.Conn(), IdleDuration: 2 * pingIdle}))
		c.Release()
	}
	return pids, ping
}

const PingIdle = pingIdle

// WarmOne runs the trigger warm-up on one of s's idle connections and
// returns the session's transaction status after it ('I': idle).
func WarmOne(ctx context.Context, s *Store) (byte, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	s.warmTrigger(ctx, c.Conn())
	return c.Conn().PgConn().TxStatus(), nil
}

// SessionID returns the id of a session of this store, the row of the
// sessions table that tests look at.
func SessionID(ss tenure.StoreSession) string { return ss.(*session).id }

// SessionsTable returns the name of the store's sessions table.
func (s *Store) SessionsTable() string { return s.sessions.table }

// DerivedName is derivedName, for its test.
var DerivedName = derivedName

// SetListenLinger sets how long the LISTEN connection of stores opened
// from now on outlives its last watch, for t's duration.
func SetListenLinger(t interface{ Cleanup(func()) }, d time.Duration) {
	old := listenLinger
	listenLinger = d
	t.Cleanup(func() { listenLinger = old })
}
