package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure"
)

// execOn runs statements on srv's database with a plain connection, as a
// newer tenure or psql would.
func execOn(t *testing.T, sqls ...string) {
	t.Helper()
	ctx := ctxFor(t)
	conn, err := pgx.Connect(ctx, server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// A lease table a newer tenure changed (a column this build does not
// know, a row of a format it does not know) never shows a live grant of
// it as free or at a lower term: the statements name their columns, and a
// row is held while its holder is set and expires_at ahead, whatever else
// it has. A column this build needs that a newer one dropped, or one it
// cannot fill, makes its statements fail with PostgreSQL's error naming
// the column, in one line naming the key.
func TestNewerTable(t *testing.T) {
	table := randomName("newer_")
	st := openTable(t, table)
	ctx := ctxFor(t)
	l, err := st.Acquire(ctx, "seed", "older", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q := pgx.Identifier{table}.Sanitize()
	execOn(t, `ALTER TABLE `+q+` ADD COLUMN format int NOT NULL DEFAULT 1, ADD COLUMN fence bigint`,
		`INSERT INTO `+q+` (key, holder, term, token, ttl_ns, expires_at, format, fence)
			VALUES ('k', 'v99', 41, 'tok', 60000000000, now() + interval '1 minute', 99, 7)`)
	_, err = st.Acquire(ctx, "k", "older", time.Second)
	var held *tenure.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "v99" || held.Record.Term != 41 {
		t.Fatalf("Acquire over a row of a newer format: %v; want held by v99 at term 41", err)
	}
	if err := st.Renew(ctx, l); err != nil {
		t.Fatalf("Renew on a table with more columns: %v", err)
	}
	execOn(t, `ALTER TABLE `+q+` ADD COLUMN epoch bigint NOT NULL DEFAULT 0`, `ALTER TABLE `+q+` ALTER COLUMN epoch DROP DEFAULT`)
	_, err = st.Acquire(ctx, "new-key", "older", time.Second)
	wantOneLine(t, err, `"new-key"`, `"epoch"`)
	execOn(t, `ALTER TABLE `+q+` DROP COLUMN epoch, DROP COLUMN ttl_ns`)
	_, err = st.Get(ctx, "k")
	wantOneLine(t, err, `"k"`, "ttl_ns")
}

func wantOneLine(t *testing.T, err error, wants ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one naming %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) || strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q: want one line naming %s", err, w)
		}
	}
}
