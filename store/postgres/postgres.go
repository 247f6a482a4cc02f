package postgres

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/storeurl"
)

// DefaultTable is the lease table used when the URL names none.
const DefaultTable = "tenure_leases"

// TableParam is the URL query parameter naming the lease table, as in
// postgres://host/db?tenure_table=my_leases. It is removed from the URL
// before connecting. The table is created on first use if missing.
const TableParam = "tenure_table"

// tableName is what TableParam accepts: one unquoted identifier that
// PostgreSQL keeps as is. Choose the schema with the search_path parameter.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Store is a lease store on a PostgreSQL table. Create it with [Open] (or
// tenure.Open); it is safe for concurrent use, and every call blocks until
// the server answered or its ctx is done.
type Store struct {
	pool     *pgxpool.Pool
	table    string // identifier, validated
	channel  string // LISTEN/NOTIFY channel: the table name
	redacted string // the URL for messages, password hidden
	secret   string // the password, scrubbed from every error

	q    queries
	seen seen.Terms // the highest term this Store saw per key

	sessions *sessionSchema // see session_sql.go

	migrated migration // the lease table

	closed   atomic.Bool
	closeMu  sync.Mutex
	done     chan struct{} // closed by Close
	listener *listener
}

var (
	_ tenure.Publisher = (*Store)(nil)
)

func init() {
	storeurl.RegisterString(Open, "postgres", "postgresql")
}

// Open returns a store for the PostgreSQL database named by rawURL,
// postgres://user:password@host:port/database?params, where params are
// those of pgx (sslmode, search_path, pool_max_conns...) plus [TableParam].
//
// Open connects nothing: connections are made on demand by a pool, so a
// store opened while the server is down starts working when it comes back.
// The lease table is created by the first call that needs it. Errors wrap
// [tenure.ErrInvalid] for a bad URL and never contain the password.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := storeurl.Server(rawURL, "postgres", "postgresql")
	if err != nil {
		return nil, err
	}
	table, ok, err := u.Param(TableParam,
		"want one lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 63 bytes)", tableName.MatchString)
	if err != nil {
		return nil, err
	}
	if !ok {
		table = DefaultTable
	}
	cfg, err := pgxpool.ParseConfig(u.Driver())
	if err != nil {
		// pgx quotes the URL, hiding only its password.
		return nil, u.Refused(err)
	}
	s := &Store{
		table:    table,
		channel:  table,
		redacted: u.Redacted,
		secret:   u.Password,
		q:        newQueries(table),
		sessions: newSessionSchema(table),
		done:     make(chan struct{}),
	}
	s.listener = newListener(s, cfg.ConnConfig)
	if cfg.ConnConfig.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		// Not with other modes, which are what one picks behind a pooler
		// that cannot keep prepared statements.
		cfg.AfterConnect = s.prepare
	}
	if cfg.ShouldPing == nil {
		cfg.ShouldPing = shouldPing
	}
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, storeurl.Scrub(u.Password, fmt.Errorf("tenure/postgres: %s: %w", u.Redacted, tenure.RedactError(err, rawURL)))
	}
	return s, nil
}

// Table returns the name of the lease table.
func (s *Store) Table() string { return s.table }

// Close closes the pool and the LISTEN connection; watches end and later
// calls return [tenure.ErrClosed]. Leases still held are not released: they
// expire on the server's clock. Close waits for calls in flight to return
// their connections. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	close(s.done)
	s.listener.stop()
	s.sessions.conns.closeAll()
	s.pool.Close()
	return nil
}

// begin checks what every call checks before it talks to the server.
func (s *Store) begin(ctx context.Context) error {
	if err := ctxerr.Usable(ctx, s.closed.Load()); err != nil {
		return err
	}
	return s.migrate(ctx)
}

// checkCall is begin for a call on key, checked first: what a call on one
// key checks before it talks to the server.
func (s *Store) checkCall(ctx context.Context, key string) error {
	if err := ctxerr.Call(ctx, s.closed.Load(), key); err != nil {
		return err
	}
	return s.migrate(ctx)
}

// fail turns an error from pgx into the store's error: ErrClosed if the
// store was closed meanwhile, the context's error if it is done or past
// its deadline, and in every case a message that names the operation and
// not the password.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("tenure/postgres: %s: %w", op, tenure.ErrClosed)
	}
	return storeurl.Fail(ctx, "tenure/postgres", s.redacted, s.secret, op, err)
}
