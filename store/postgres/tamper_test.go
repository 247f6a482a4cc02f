package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/storetest"
)

// tamperOn changes the lease table with plain SQL, as an operator in psql
// would.
func tamperOn(srv *testserver.PostgresServer, table string) *storetest.Tamper {
	t := pgx.Identifier{table}.Sanitize()
	exec := func(tb testing.TB, sql string, args ...any) {
		tb.Helper()
		ctx := ctxFor(tb)
		conn, err := pgx.Connect(ctx, srv.URL())
		if err != nil {
			tb.Fatal(err)
		}
		defer conn.Close(context.Background())
		tag, err := conn.Exec(ctx, sql, args...)
		if err != nil || tag.RowsAffected() != 1 {
			tb.Fatalf("tamper %q: %v, %d rows", sql, err, tag.RowsAffected())
		}
	}
	return &storetest.Tamper{
		// "Free the stuck lock": clear the holder, leaving the term.
		DeleteGrant: func(tb testing.TB, key string) {
			exec(tb, `UPDATE `+t+` SET holder = '', token = '' WHERE key = $1`, key)
		},
		OverwriteGrant: func(tb testing.TB, key, id string) {
			exec(tb, `UPDATE `+t+` SET holder = $2, token = 'overwritten' WHERE key = $1`, key, id)
		},
		DeleteAll: func(tb testing.TB, key string) {
			exec(tb, `DELETE FROM `+t+` WHERE key = $1`, key)
		},
	}
}
