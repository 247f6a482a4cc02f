package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure"
)

// A table created before values were published (no value column) gains
// the column on first use; its rows, and their terms, keep working.
func TestValueColumnAddedToOldTable(t *testing.T) {
	table := randomName("oldschema")
	conn, err := pgx.Connect(ctxFor(t), server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctxFor(t), `CREATE TABLE `+pgx.Identifier{table}.Sanitize()+` (
	key        text PRIMARY KEY,
	holder     text NOT NULL DEFAULT '',
	term       bigint NOT NULL CHECK (term > 0),
	token      text NOT NULL DEFAULT '',
	ttl_ns     bigint NOT NULL DEFAULT 0,
	expires_at timestamptz
);
INSERT INTO `+pgx.Identifier{table}.Sanitize()+` (key, term) VALUES ('job', 41)`)
	if err != nil {
		t.Fatal(err)
	}
	st := openTable(t, table)
	l, err := st.AcquireClaim(ctxFor(t), "job", tenure.Claim{Identity: "a", TTL: 5 * time.Second, Value: "10.0.0.7:8080"})
	if err != nil {
		t.Fatalf("AcquireClaim on an old table: %v", err)
	}
	if l.Term != 42 {
		t.Errorf("term %d, want 42 (after the old row's 41)", l.Term)
	}
	r, err := st.Get(ctxFor(t), "job")
	if err != nil || r.Value != "10.0.0.7:8080" {
		t.Fatalf("Get = %+v, %v; want value 10.0.0.7:8080", r, err)
	}
}
