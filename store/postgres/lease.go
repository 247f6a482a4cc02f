package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/token"
)

// queries holds the store's SQL, with the table name filled in.
//
// Every time in them is the server's: now() is the start of the statement's
// transaction, which here is the statement itself. A statement that waited
// for a row lock judges with the earlier time, which errs on the safe side:
// a grant looks live a little longer and a new grant ends a little sooner.
type queries struct {
	migrate, addValue, trigger, warm, acquire, renew, release, get string
}

// schemaQueries returns q with the statements that create and upgrade
// the table of table name t (sanitized) and its trigger function fn.
func schemaQueries(q queries, t, fn string) queries {
	// Rows are never deleted: the term of a key lives as long as the
	// table, which is what keeps terms growing across releases,
	// expiries and server restarts.
	q.migrate = `CREATE TABLE IF NOT EXISTS ` + t + ` (
	key        text PRIMARY KEY,
	holder     text NOT NULL DEFAULT '',
	term       bigint NOT NULL CHECK (term > 0),
	token      text NOT NULL DEFAULT '',
	ttl_ns     bigint NOT NULL DEFAULT 0,
	expires_at timestamptz,
	value      text NOT NULL DEFAULT ''
)`
	// A table made before values were published gains the value
	// column. Altered only if the column is missing: ALTER TABLE locks
	// the table against every renewal, even when it changes nothing.
	q.addValue = `DO $tenure$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = ` + quoteLiteral(t) + `::regclass AND attname = 'value' AND NOT attisdropped) THEN
		ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS value text NOT NULL DEFAULT '';
	END IF;
END $tenure$`
	// A row changed by anything but a renewal (which sets only
	// expires_at) notifies watchers, so that an UPDATE or DELETE from
	// outside tenure wakes them too. Created once, only if missing:
	// replacing a trigger locks the table against every renewal.
	// Best effort: see migrate.
	q.trigger = `DO $tenure$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'tenure_notify' AND tgrelid = ` + quoteLiteral(t) + `::regclass) THEN
		CREATE OR REPLACE FUNCTION ` + fn + `() RETURNS trigger LANGUAGE plpgsql AS $f$
		BEGIN
			PERFORM pg_notify(TG_TABLE_NAME, COALESCE(NEW.key, OLD.key));
			RETURN NULL;
		END $f$;
		CREATE TRIGGER tenure_notify AFTER UPDATE OF holder, term, token OR DELETE ON ` + t + `
			FOR EACH ROW EXECUTE FUNCTION ` + fn + `();
	END IF;
END $tenure$`
	// Fires the trigger once on a row of key '' (never a valid key),
	// inserted and updated only inside a transaction that is rolled back:
	// no other row is locked, nothing is notified, nothing stays.
	q.warm = `BEGIN;
INSERT INTO ` + t + ` (key, term) VALUES ('', 1) ON CONFLICT (key) DO NOTHING;
UPDATE ` + t + ` SET holder = holder WHERE key = '';
ROLLBACK`
	return q
}

func newQueries(table string) queries {
	t := pgx.Identifier{table}.Sanitize()
	fn := pgx.Identifier{table + "_notify"}.Sanitize()
	return schemaQueries(queries{
		// One statement: insert the key, or take it over when it is free
		// or its grant has expired, with the next term (above $6, the
		// highest term this Store saw: a deleted row must not restart
		// terms); notify watchers in the same transaction, so they hear of
		// it exactly when it commits. It also returns how long the last
		// grant had left if it vanished (holder cleared without a release,
		// which sets expires_at to NULL) in µs, 0 if it was released or
		// expired, -1 if there was no row. A grant whose expires_at was
		// cleared from outside (its holder's Renew fails) is taken over
		// like one that vanished; the wait is at most the longer of the
		// last grant's TTL and this one's, the most its holder can still
		// run, whatever expiry was written from outside.
		acquire: `WITH prev AS (
	SELECT CASE WHEN holder = '' AND expires_at > now() OR holder <> '' AND expires_at IS NULL
		THEN least(ceil(extract(epoch FROM ` + farExpiry + ` - now()) * 1000000), greatest(ttl_ns, $4::bigint) / 1000)::bigint
		ELSE 0 END AS wait_us
	FROM ` + t + ` WHERE key = $1
), granted AS (
	INSERT INTO ` + t + ` AS l (key, holder, term, token, ttl_ns, expires_at, value)
	VALUES ($1, $2, $6::bigint + 1, $3, $4, now() + ($4::bigint / 1000) * interval '1 microsecond', $7)
	ON CONFLICT (key) DO UPDATE
		SET holder = excluded.holder, term = greatest(l.term, $6::bigint) + 1, token = excluded.token,
			ttl_ns = excluded.ttl_ns, expires_at = excluded.expires_at, value = excluded.value
		WHERE l.holder = '' OR l.expires_at IS NULL OR l.expires_at <= now()
	RETURNING l.term
), notified AS (
	SELECT pg_notify($5, $1) FROM granted
)
SELECT term, (SELECT count(*) FROM notified), coalesce((SELECT wait_us FROM prev), -1) FROM granted`,
		renew: `UPDATE ` + t + `
SET expires_at = now() + (ttl_ns / 1000) * interval '1 microsecond'
WHERE key = $1 AND holder = $2 AND term = $3 AND token = $4 AND holder <> '' AND expires_at > now()
	AND ttl_ns >= 1000`,
		release: `WITH released AS (
	UPDATE ` + t + ` SET holder = '', token = '', ttl_ns = 0, expires_at = NULL, value = ''
	WHERE key = $1 AND holder = $2 AND term = $3 AND token = $4 AND holder <> '' AND expires_at > now()
	RETURNING key
), notified AS (
	SELECT pg_notify($5, $1) FROM released
)
SELECT count(*), (SELECT count(*) FROM notified) FROM released`,
		// Remaining in microseconds, or -1 when no live grant.
		get: `SELECT holder, term, ttl_ns, value,
	CASE WHEN holder <> '' AND expires_at > now()
		THEN ceil(extract(epoch FROM ` + farExpiry + ` - now()) * 1000000)::bigint
		ELSE -1 END
FROM ` + t + ` WHERE key = $1`,
	}, t, fn)
}

// farExpiry is the lease row's expires_at, or a thousand years from now if
// it is later: 'infinity', which PostgreSQL will not subtract from, or a
// date written from outside more microseconds ahead than a bigint holds.
const farExpiry = `least(expires_at, now() + interval '1000 years')`

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// migrateLockClass is the first key of the transaction-level advisory lock
// that serialises table creation among candidates starting at once (two
// concurrent CREATE TABLE IF NOT EXISTS can otherwise both try to create).
const migrateLockClass = 0x7e6e // "tenure"

// migration is a schema change a store makes once, on first use: in one
// transaction, under the advisory lock of migrateLockClass and the lease
// table. A failed one is tried again by the next call that needs it.
type migration struct {
	mu   sync.Mutex
	done atomic.Bool
}

// run runs change, unless it already succeeded on this store, and reports
// whether it ran now; a call waits for a concurrent one to end. what names
// the change in errors.
func (m *migration) run(ctx context.Context, s *Store, what string, change func(pgx.Tx) error) (ran bool, err error) {
	if m.done.Load() {
		return false, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.done.Load() {
		return false, nil
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, migrateLockClass, s.table); err != nil {
			return err
		}
		return change(tx)
	})
	if err != nil {
		return false, s.fail(ctx, what, err)
	}
	m.done.Store(true)
	return true, nil
}

// migrate creates the lease table once per store, on first use; it is
// retried by later calls if it fails.
func (s *Store) migrate(ctx context.Context) error {
	ran, err := s.migrated.run(ctx, s, "creating table "+s.table, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.q.migrate); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q.addValue); err != nil {
			return err
		}
		// Without the right to create the trigger (a table owned by
		// another role), watches miss changes made outside tenure until
		// the holder's next renewal; everything else works.
		_ = pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
			_, err := sp.Exec(ctx, s.q.trigger)
			return err
		})
		return nil
	})
	if ran {
		s.prepareIdle(ctx)
	}
	return err
}

// prepareIdle readies the statements on the pool's idle connections, the
// ones opened before the table existed (the one that created it, at
// least), for which AfterConnect had nothing to prepare. Otherwise the
// first Release or Acquire on such a connection, on the handoff's path,
// waits for one more round trip to parse and plan the statement.
func (s *Store) prepareIdle(ctx context.Context) {
	if s.pool.Config().AfterConnect == nil {
		return // a mode without prepared statements (see Open)
	}
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		_ = s.prepare(ctx, c.Conn())
		c.Release()
	}
}

// prepare readies the store's statements on a new pooled connection, so
// their first use (on the failover path, say) does not pay for planning
// and loading the table's catalog entries. Before the table exists there
// is nothing to prepare; a failure only means a later first use pays.
func (s *Store) prepare(ctx context.Context, conn *pgx.Conn) error {
	if !s.migrated.done.Load() {
		return nil
	}
	for _, sql := range []string{s.q.acquire, s.q.renew, s.q.release, s.q.get} {
		// Named by its text, a prepared statement is what pgx uses when
		// that text is queried.
		if _, err := conn.Prepare(ctx, sql, sql); err != nil {
			return nil
		}
	}
	s.warmTrigger(ctx, conn)
	return nil
}

// warmTrigger has the server compile the notify trigger's function for
// conn's session, which it does the first time the trigger fires there:
// otherwise the first grant made on a connection pays for that (about 4 ms
// on a loaded 2-core machine, 0.5 ms for a grant after it) on the
// handoff's path. Best effort; the session is left idle either way.
func (s *Store) warmTrigger(ctx context.Context, conn *pgx.Conn) {
	pc := conn.PgConn()
	_, _ = pc.Exec(ctx, s.q.warm).ReadAll()
	if pc.TxStatus() != 'I' && !pc.IsClosed() {
		_, _ = pc.Exec(ctx, "ROLLBACK").ReadAll()
	}
}

// retry runs fn once more if it failed before sending anything, as a pooled
// connection broken by a server restart does.
func retry(ctx context.Context, fn func() error) error {
	err := fn()
	if err != nil && pgconn.SafeToRetry(err) && ctx.Err() == nil {
		err = fn()
	}
	return err
}

// newToken returns a new grant or session token: 16 random bytes, hex-encoded.
func newToken() string { return token.Hex(16) }

// Acquire implements [tenure.Store]. It is one INSERT ... ON CONFLICT DO
// UPDATE statement, atomic on the server; when the key is held it reads
// the record for the [tenure.HeldError].
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Store.Acquire], keeping
// c.Value in the row's value column, cleared when the grant is released.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	if err := tenure.CheckClaim(key, c); err != nil {
		return tenure.Lease{}, err
	}
	identity, ttl := c.Identity, c.TTL
	if ttl < time.Microsecond {
		return tenure.Lease{}, fmt.Errorf("%w: ttl %s is shorter than PostgreSQL's resolution of 1µs", tenure.ErrInvalid, ttl)
	}
	sent := time.Now()
	if err := s.begin(ctx); err != nil {
		return tenure.Lease{}, err
	}
	return s.grantOrHeld(ctx, key, func(floor seen.Grant) (tenure.Lease, bool, error) {
		token := newToken()
		var term, notified, waitUS int64
		err := retry(ctx, func() error {
			return s.pool.QueryRow(ctx, s.q.acquire, key, identity, token, int64(ttl), s.channel, int64(floor.Term), c.Value).
				Scan(&term, &notified, &waitUS)
		})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return tenure.Lease{}, true, nil
		case err != nil:
			return tenure.Lease{}, false, s.acquireFailed(ctx, "acquire", key, err)
		}
		l := tenure.Lease{Key: key, Identity: identity, Term: uint64(term), TTL: ttl, Token: token, Value: c.Value,
			Wait: grantWait(sent, floor, waitUS)}
		s.seen.Observe(key, l.Term, ttl)
		return l, false, nil
	})
}

// acquireFailed describes err, the failure of op, an acquire statement for
// key (a session's too). A row whose term was set to the largest bigint
// from outside makes the statement fail with numeric_value_out_of_range,
// since the next term does not fit: that is [tenure.ErrTermsExhausted],
// which the elector does not retry, once a read of the row confirms the
// term.
func (s *Store) acquireFailed(ctx context.Context, op, key string, err error) error {
	if outOfRange(err) {
		if r, gerr := s.get(ctx, key); gerr == nil && r.Term >= math.MaxInt64 {
			s.seen.Observe(key, r.Term, r.TTL)
			return fmt.Errorf("%w: tenure/postgres: key %q: its term is %d, the largest the column holds (2^63-1; was the row written from outside?)",
				tenure.ErrTermsExhausted, key, r.Term)
		}
	}
	return s.fail(ctx, fmt.Sprintf("%s of %q", op, key), err)
}

// outOfRange reports whether err is PostgreSQL's numeric_value_out_of_range,
// which an acquire statement fails with when a key's next term does not fit.
func outOfRange(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == "22003"
}

// grantOrHeld runs grant, which tries once to grant key at a term above
// floor, the [Store.termFloor] of key, and reports held when the key was
// held, and returns what it granted or failed with. A grant that lapses
// between the refused statement and the read of the row shows as free:
// grant is tried again, three times in all, rather than a free key
// reported as held. A key still held is a [tenure.HeldError] with the
// record read.
func (s *Store) grantOrHeld(ctx context.Context, key string, grant func(floor seen.Grant) (l tenure.Lease, held bool, err error)) (tenure.Lease, error) {
	floor, err := s.termFloor(key)
	if err != nil {
		return tenure.Lease{}, err
	}
	var r tenure.Record
	for range 3 {
		l, held, err := grant(floor)
		if !held {
			return l, err
		}
		if r, err = s.get(ctx, key); err != nil {
			return tenure.Lease{}, err
		}
		if r.Held() {
			break
		}
	}
	s.seen.Observe(key, r.Term, r.TTL)
	return tenure.Lease{}, &tenure.HeldError{Record: r}
}

// grantWait returns the Wait of a grant sent at sent, whose statement
// answered waitUS: above 0, the microseconds the last grant, which
// vanished before it expired, had left; below 0, that the key's row is
// gone, when the worst is assumed from floor, the highest grant this
// Store saw.
func grantWait(sent time.Time, floor seen.Grant, waitUS int64) time.Duration {
	switch {
	case waitUS > 0: // the last grant vanished before it expired
		return seen.WaitSince(sent, micros(waitUS))
	case waitUS < 0 && floor.Term > 0: // its row is gone: assume the worst
		return seen.WaitSince(sent, floor.TTL)
	}
	return 0
}

// Renew implements [tenure.Store]: it moves the grant's expiry to the
// server's now plus its TTL, if l is still the key's live grant. A row
// whose ttl_ns was set below 1µs from outside is not renewed (ErrLost):
// its expiry would move into the past, ending the grant.
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	return s.onGrant(ctx, "renew", l, func() (int64, error) {
		tag, err := s.pool.Exec(ctx, s.q.renew, l.Key, l.Identity, int64(l.Term), l.Token)
		return tag.RowsAffected(), err
	})
}

// Release implements [tenure.Store]: it clears the holder, keeping the row
// and its term, and notifies watchers in the same transaction.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	return s.onGrant(ctx, "release", l, func() (int64, error) {
		var n, notified int64
		err := s.pool.QueryRow(ctx, s.q.release, l.Key, l.Identity, int64(l.Term), l.Token, s.channel).Scan(&n, &notified)
		return n, err
	})
}

// onGrant runs do, a statement that acts on l's row only while l holds it
// (holder, term and token match) and returns how many rows it acted on,
// retried as [retry] does. A lease this store cannot have granted, or a
// count other than 1, is ErrLost; op names the call in errors.
func (s *Store) onGrant(ctx context.Context, op string, l tenure.Lease, do func() (int64, error)) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	if l.Term > math.MaxInt64 || l.Token == "" {
		return fmt.Errorf("%w: key %q term %d is not a grant of this store", tenure.ErrLost, l.Key, l.Term)
	}
	var n int64
	err := retry(ctx, func() (err error) {
		n, err = do()
		return err
	})
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("%s of %q term %d", op, l.Key, l.Term), err)
	}
	if n != 1 {
		return fmt.Errorf("%w: key %q term %d expired, was released or taken over", tenure.ErrLost, l.Key, l.Term)
	}
	return nil
}

// Get implements [tenure.Store]. Remaining is computed by the server.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return tenure.Record{}, err
	}
	r, err := s.get(ctx, key)
	if err != nil {
		return r, err
	}
	return s.seen.Record(r), nil
}

func (s *Store) get(ctx context.Context, key string) (tenure.Record, error) {
	r := tenure.Record{Key: key}
	var holder, value string
	var term, ttl, remainingUS int64
	err := retry(ctx, func() error {
		return s.pool.QueryRow(ctx, s.q.get, key).Scan(&holder, &term, &ttl, &value, &remainingUS)
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, nil
	case err != nil:
		return r, s.fail(ctx, fmt.Sprintf("get of %q", key), err)
	}
	r.Term = uint64(term)
	if remainingUS > 0 {
		r.Holder, r.TTL, r.Remaining, r.Value = holder, time.Duration(ttl), micros(remainingUS), value
	}
	return r, nil
}

// micros is us microseconds, at most the largest Duration: an expires_at
// set from outside far in the future (PostgreSQL takes the year 200000)
// is more than a Duration holds, and must not overflow to a negative one.
func micros(us int64) time.Duration {
	if us > math.MaxInt64/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return time.Duration(us) * time.Microsecond
}

// termFloor is the highest term this handle saw granted for key, which a
// new grant must exceed; an error if no greater term fits the column.
func (s *Store) termFloor(key string) (seen.Grant, error) {
	floor := s.seen.Highest(key)
	if floor.Term >= math.MaxInt64 {
		return floor, fmt.Errorf("%w: tenure/postgres: key %q: term %d seen, and no greater term fits the column (2^63-1 at most)", tenure.ErrTermsExhausted, key, floor.Term)
	}
	return floor, nil
}
