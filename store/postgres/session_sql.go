package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/jackc/pgx/v5"
)

// sessionSchema is what sessions add to a store: their table, the lease
// table's session column and its index, the statements on them, and
// whether this store made sure they exist.
type sessionSchema struct {
	table string // the sessions table's name, unquoted
	q     sessionQueries

	migrated migration

	conns sessionConns // see session_conn.go
}

// sessionQueries holds the SQL of sessions, names filled in.
type sessionQueries struct {
	migrate                       []string
	open, acquire                 string
	keepSession, keepGrants       string
	closeSession, releaseSessions string
	releaseDoubtful               string
}

// maxIdent is PostgreSQL's longest identifier, in bytes.
const maxIdent = 63

// derivedName returns table+suffix, or, if that is too long for an
// identifier (PostgreSQL would cut it silently, and two long table names
// could then share it), a shortened table name with a hash of the whole.
func derivedName(table, suffix string) string {
	if len(table)+len(suffix) <= maxIdent {
		return table + suffix
	}
	sum := sha256.Sum256([]byte(table))
	h := "_" + hex.EncodeToString(sum[:5])
	return table[:maxIdent-len(suffix)-len(h)] + h + suffix
}

func newSessionSchema(table string) *sessionSchema {
	st := derivedName(table, "_sessions")
	return &sessionSchema{table: st, q: newSessionQueries(table, st)}
}

// newSessionQueries returns the statements of sessions on lease table
// table, with sessions table st (both unquoted).
//
// A session is a row of st with its own expiry. Each grant in it is an
// ordinary row of the lease table whose session column names it and
// whose token starts with the session's id and a dot (a row rewritten or
// taken over from outside keeps the column but not the token), with the
// session's expiry as its own: everything that reads the lease table
// (Acquire, Get, Watch, the Wait of a vanished grant) works on it
// unchanged. A keep-alive moves the session's expiry and copies it to its
// grants' rows; it changes no holder, term or token, so it notifies
// nobody.
//
// Lock order, everywhere: the session's row, then grant rows. A grant in
// a session locks the session's row (FOR SHARE) so that it copies the
// latest expiry; a keep-alive or close locks it in a first statement and
// acts on the grant rows in a second one of the same transaction, whose
// fresh snapshot sees every grant committed before it got the lock.
func newSessionQueries(table, st string) sessionQueries {
	t := pgx.Identifier{table}.Sanitize()
	s := pgx.Identifier{st}.Sanitize()
	idx := pgx.Identifier{derivedName(table, "_session_idx")}
	var q sessionQueries
	q.migrate = sessionMigrations(t, s, idx.Sanitize())
	// Sessions that expired are of no use to anybody: their owners'
	// keep-alives fail the same with or without the row.
	q.open = `WITH gc AS (
	DELETE FROM ` + s + ` WHERE expires_at <= now()
)
INSERT INTO ` + s + ` (id, ttl_ns, expires_at)
VALUES ($1, $2, now() + ($2::bigint / 1000) * interval '1 microsecond')`
	// As the lease table's acquire, but only while the session lives, and
	// with its TTL and expiry. Returns whether the session lives, the term
	// granted (0 if held), and the wait of a vanished grant as acquire.
	q.acquire = `WITH sess AS (
	SELECT ttl_ns, expires_at FROM ` + s + ` WHERE id = $7 AND expires_at > now() FOR SHARE
), prev AS (
	SELECT CASE WHEN holder = '' AND expires_at > now() OR holder <> '' AND expires_at IS NULL
		THEN least(ceil(extract(epoch FROM ` + farExpiry + ` - now()) * 1000000), greatest(ttl_ns, (SELECT ttl_ns FROM sess)) / 1000)::bigint
		ELSE 0 END AS wait_us
	FROM ` + t + ` WHERE key = $1
), granted AS (
	INSERT INTO ` + t + ` AS l (key, holder, term, token, ttl_ns, expires_at, value, session)
	SELECT $1, $2, $5::bigint + 1, $3, sess.ttl_ns, sess.expires_at, $6, $7 FROM sess
	ON CONFLICT (key) DO UPDATE
		SET holder = excluded.holder, term = greatest(l.term, $5::bigint) + 1, token = excluded.token,
			ttl_ns = excluded.ttl_ns, expires_at = excluded.expires_at, value = excluded.value,
			session = excluded.session
		WHERE l.holder = '' OR l.expires_at IS NULL OR l.expires_at <= now()
	RETURNING l.term
), notified AS (
	SELECT pg_notify($4, $1) FROM granted
)
SELECT (SELECT count(*) FROM sess) > 0, coalesce((SELECT term FROM granted), 0),
	(SELECT count(*) FROM notified), coalesce((SELECT wait_us FROM prev), -1)`
	q.keepSession = `UPDATE ` + s + `
SET expires_at = now() + (ttl_ns / 1000) * interval '1 microsecond'
WHERE id = $1 AND expires_at > now()`
	q.keepGrants = `UPDATE ` + t + ` AS l SET expires_at = s.expires_at
FROM ` + s + ` AS s
WHERE s.id = $1 AND s.expires_at > now()
	AND l.session = $1 AND starts_with(l.token, $2) AND l.holder <> '' AND l.expires_at > now()
RETURNING l.key, l.term`
	// Grants in doubt (see doubt), by key and token.
	q.releaseDoubtful = `WITH released AS (
	UPDATE ` + t + ` SET holder = '', token = '', ttl_ns = 0, expires_at = NULL, value = ''
	WHERE key = ANY($1::text[]) AND token = ANY($2::text[]) AND holder <> ''
	RETURNING key
), notified AS (
	SELECT pg_notify($3, key) FROM released
)
SELECT count(*) FROM notified`
	q.closeSession = `DELETE FROM ` + s + ` WHERE id = $1 RETURNING expires_at > now()`
	q.releaseSessions = `WITH released AS (
	UPDATE ` + t + ` SET holder = '', token = '', ttl_ns = 0, expires_at = NULL, value = ''
	WHERE session = $1 AND starts_with(token, $2) AND holder <> '' AND expires_at > now()
	RETURNING key
), notified AS (
	SELECT pg_notify($3, key) FROM released
)
SELECT count(*) FROM notified`
	return q
}

// sessionMigrations returns the statements that make lease table t ready
// for sessions, with sessions table s and index idx (all sanitized).
func sessionMigrations(t, s, idx string) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + s + ` (
	id         text PRIMARY KEY,
	ttl_ns     bigint NOT NULL,
	expires_at timestamptz NOT NULL
)`,
		// Altered and indexed only if missing: both lock the lease table
		// against every renewal, even when they change nothing.
		`DO $tenure$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = ` + quoteLiteral(t) + `::regclass AND attname = 'session' AND NOT attisdropped) THEN
		ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS session text;
	END IF;
	IF to_regclass(` + quoteLiteral(idx) + `) IS NULL THEN
		CREATE INDEX IF NOT EXISTS ` + idx + ` ON ` + t + ` (session) WHERE session IS NOT NULL;
	END IF;
END $tenure$`,
	}
}

// migrateSessions creates what sessions need, once per store, as a
// [migration] beside [Store.migrate]'s; it is retried by later calls if it
// fails. It needs the lease table's owner the first time.
func (s *Store) migrateSessions(ctx context.Context) error {
	sc := s.sessions
	_, err := sc.migrated.run(ctx, s, "creating the sessions of table "+s.table, func(tx pgx.Tx) error {
		for _, sql := range sc.q.migrate {
			if _, err := tx.Exec(ctx, sql); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}
