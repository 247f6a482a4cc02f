package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenurehq/tenure/internal/ctxwait"
)

// A session sends its keep-alives, and its close, on a connection of its
// own, apart from the pool, made on first use and re-made after a failure:
//
//   - a keep-alive never queues behind the pool's other calls: thousands of
//     electors campaigning at once keep every pooled connection busy for
//     longer than a renew deadline, and a session lost then ends every term
//     in it;
//   - pgxpool pings a connection idle for over a second before handing it
//     out, which would double the requests of an idle session.

// sessionConns tracks the sessions that may hold a connection, so that
// the store's Close closes them.
type sessionConns struct {
	mu     sync.Mutex
	open   map[*session]struct{}
	closed bool
}

// add registers ss; it reports false once the store is closed.
func (c *sessionConns) add(ss *session) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	if c.open == nil {
		c.open = map[*session]struct{}{}
	}
	c.open[ss] = struct{}{}
	return true
}

func (c *sessionConns) remove(ss *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.open, ss)
}

// closeAll closes every session's connection, waiting for the call using
// it (cancelled by the store's Close) to return.
func (c *sessionConns) closeAll() {
	c.mu.Lock()
	c.closed = true
	open := make([]*session, 0, len(c.open))
	for ss := range c.open {
		open = append(open, ss)
	}
	c.open = nil
	c.mu.Unlock()
	for _, ss := range open {
		ss.keep <- struct{}{}
		ss.dropConn()
		<-ss.keep
	}
}

// lock takes the session's connection (and the right to keep it alive or
// close it), or returns ctx's error.
func (ss *session) lock(ctx context.Context) error {
	select {
	case ss.keep <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (ss *session) unlock() { <-ss.keep }

// exchange sends the batch mk makes on the session's connection,
// connecting first if there is none, and once more on a new connection if
// the first attempt failed before anything was sent. The store's Close
// cancels it. Call it holding the lock.
func (ss *session) exchange(ctx context.Context, mk func() *pgx.Batch) error {
	s := ss.s
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctxwait.CancelOnClose(ctx, s.done, cancel)
	for attempt := 0; ; attempt++ {
		if ss.conn == nil {
			conn, err := pgx.ConnectConfig(ctx, ss.cfg)
			if err != nil {
				return err
			}
			ss.conn = conn
		}
		err := ss.conn.SendBatch(ctx, mk()).Close()
		if err == nil {
			return nil
		}
		if _, ok := errors.AsType[*pgconn.PgError](err); !ok {
			ss.dropConn() // its state is unknown
		}
		if attempt > 0 || !pgconn.SafeToRetry(err) || ctx.Err() != nil {
			return err
		}
	}
}

// dropConn closes the session's connection, if any. Call it holding the
// lock.
func (ss *session) dropConn() {
	if ss.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = ss.conn.Close(ctx)
	ss.conn = nil
}

// finish ends the session because of err, as end does, and lets its
// connection go; it returns err. Call it holding the lock.
func (ss *session) finish(err error) error {
	ss.end(err)
	ss.dropConn()
	ss.s.sessions.conns.remove(ss)
	return err
}
