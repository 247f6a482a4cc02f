package compare

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"cirello.io/pglock"
	"github.com/jackc/pgx/v5"
	_ "github.com/lib/pq" // the driver pglock.New requires

	"github.com/tenurehq/tenure/internal/testserver"
)

// pgServer is a PostgreSQL server with pg_stat_statements loaded, so that
// statements can be counted server-side.
type pgServer struct {
	url  string
	stat *pgx.Conn
}

// startPostgres starts PostgreSQL for t, restarts it once with
// pg_stat_statements preloaded and creates the extension.
func startPostgres(t *testing.T, ctx context.Context) *pgServer {
	t.Helper()
	srv := testserver.Postgres(t)
	conn, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	_, err = conn.Exec(ctx, "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("preload pg_stat_statements: %v", err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stat, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatalf("connect to postgres: %v", err)
	}
	t.Cleanup(func() { stat.Close(context.Background()) })
	if _, err := stat.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		t.Fatalf("pg_stat_statements (server package postgresql-contrib or postgresql): %v", err)
	}
	return &pgServer{url: srv.URL(), stat: stat}
}

// requests returns the statements the server executed so far, except the
// counting queries themselves.
func (s *pgServer) requests(ctx context.Context) (int64, error) {
	var n int64
	err := s.stat.QueryRow(ctx,
		"SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'").Scan(&n)
	return n, err
}

// pglockContender runs cirello.io/pglock, one *sql.DB (lib/pq) and client
// per candidate, lease TTL and heartbeat TTL/4 (its defaults are 20 s and
// 5 s).
type pglockContender struct {
	url string
	ttl time.Duration
}

const pglockTable = "pglock_compare"

// createTable creates pglock's table once.
func (c *pglockContender) createTable() error {
	db, err := sql.Open("postgres", c.url)
	if err != nil {
		return err
	}
	cl, err := pglock.New(db, pglock.WithCustomTable(pglockTable))
	if err != nil {
		return err
	}
	defer db.Close()
	return cl.TryCreateTable()
}

func (c *pglockContender) Start(ctx context.Context, key, id string, onLead func()) (candidate, error) {
	db, err := sql.Open("postgres", c.url)
	if err != nil {
		return nil, err
	}
	cl, err := pglock.New(db, pglock.WithCustomTable(pglockTable), pglock.WithOwner(id),
		pglock.WithLeaseDuration(c.ttl), pglock.WithHeartbeatFrequency(c.ttl/4))
	if err != nil {
		db.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	pc := &pglockCandidate{db: db, cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pc.done)
		l, err := cl.AcquireContext(runCtx, key)
		if err != nil {
			return
		}
		pc.lock = l
		onLead()
	}()
	return pc, nil
}

type pglockCandidate struct {
	db     *sql.DB
	cl     *pglock.Client
	lock   *pglock.Lock // set before onLead
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Release releases the lock, as pglock's users do.
func (c *pglockCandidate) Release() {
	<-c.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.cl.ReleaseContext(ctx, c.lock)
}

// Crash closes the database handle: heartbeats fail and stop, nothing is
// released, the row keeps its last version.
func (c *pglockCandidate) Crash() {
	c.db.Close()
	c.cancel()
}

func (c *pglockCandidate) Stop() {
	c.once.Do(func() {
		c.cancel() // also stops the heartbeat
		<-c.done
		c.db.Close()
	})
}
