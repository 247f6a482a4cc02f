package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/postgres"
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

// A grant whose expires_at is set with psql to a date in the year 200000
// (PostgreSQL accepts it) has more microseconds left than a Duration
// holds: Get must show it held with a positive Remaining, not one
// overflowed to minus 190 years, and the grant after it vanished must
// wait out at least the old grant's TTL rather than start at once.
func TestFarExpiryDoesNotOverflow(t *testing.T) {
	srv := server(t)
	table := randomName("farexpiry")
	st := openTable(t, table)
	l, err := st.Acquire(ctxFor(t), "k", "alpha", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctxFor(t), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctxFor(t), `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET `+sql+` WHERE key = 'k'`); err != nil {
			t.Fatal(err)
		}
	}
	exec(`expires_at = '200000-01-01'`)
	r, err := st.Get(ctxFor(t), "k")
	if err != nil || r.Holder != "alpha" || r.Remaining < 100*365*24*time.Hour {
		t.Fatalf("Get of a grant expiring in the year 200000 = %+v, %v; want held by alpha with a Remaining of at least a century", r, err)
	}
	exec(`holder = '', token = ''`) // deleted from outside, its window still open
	l2, err := st.Acquire(ctxFor(t), "k", "beta", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Term <= l.Term || l2.Wait < l.TTL {
		t.Fatalf("Acquire after the far grant vanished = term %d, Wait %s; want a term above %d and a Wait covering the old TTL %s", l2.Term, l2.Wait, l.Term, l.TTL)
	}
}

// A grant whose ttl_ns is set with psql to 0 or less: a Renew that used it
// would move expires_at into the past, ending the grant it was renewing,
// and report success. Renew must not succeed on it.
func TestRenewWithForgedTTL(t *testing.T) {
	srv := server(t)
	table := randomName("forgedttl")
	st := openTable(t, table)
	conn, err := pgx.Connect(ctxFor(t), srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i, ttl := range []int64{-1000000000, 0} {
		key := fmt.Sprint("k", i)
		l, err := st.Acquire(ctxFor(t), key, "alpha", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctxFor(t), `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET ttl_ns = $2 WHERE key = $1`, key, ttl); err != nil {
			t.Fatal(err)
		}
		if err := st.Renew(ctxFor(t), l); err == nil {
			r, _ := st.Get(ctxFor(t), key)
			t.Errorf("ttl_ns %d: Renew succeeded; the key then reads %+v", ttl, r)
		}
	}
}

// forgeTopTerm leads key on st for alpha, then sets its row's term to the
// largest bigint with psql, released or, with held, while alpha holds it;
// a held row's holder is then cleared, as an operator frees a stuck lock.
func forgeTopTerm(t *testing.T, st *postgres.Store, conn *pgx.Conn, table, key string, held bool) {
	t.Helper()
	l, err := st.Acquire(ctxFor(t), key, "alpha", 10*time.Second)
	if err == nil && !held {
		err = st.Release(ctxFor(t), l)
	}
	if err != nil {
		t.Fatal(err)
	}
	update := `UPDATE ` + pgx.Identifier{table}.Sanitize() + ` SET term = $2 WHERE key = $1`
	if _, err := conn.Exec(ctxFor(t), update, key, int64(math.MaxInt64)); err != nil {
		t.Fatal(err)
	}
	if !held {
		return
	}
	clear := `UPDATE ` + pgx.Identifier{table}.Sanitize() + ` SET holder = '', token = '' WHERE key = $1`
	if _, err := conn.Exec(ctxFor(t), clear, key); err != nil {
		t.Fatal(err)
	}
}

// A row whose term is set with psql to the largest bigint: no greater term
// fits the column, so Acquire must fail with an error matching
// tenure.ErrTermsExhausted (which the elector does not retry), whether the
// row is released or held, and from a handle that never saw the term. So
// must a session's Acquire and AcquireBatch, naming the key; the other
// keys of the batch are granted.
func TestTermsExhausted(t *testing.T) {
	table := randomName("maxterm")
	st := openTable(t, table)
	conn := sqlConn(t)
	for _, held := range []bool{false, true} {
		key := fmt.Sprint("k-", held)
		forgeTopTerm(t, st, conn, table, key, held)
		fresh := openTable(t, table)
		for range 2 { // the second time, the handle has seen the term
			_, err := fresh.Acquire(ctxFor(t), key, "beta", 10*time.Second)
			storetest.TermsExhausted(t, "Acquire", err, key, "2^63-1")
		}
		storetest.SessionRefusesExhausted(t, func() tenure.StoreSession {
			return storetest.OpenSession(t, openTable(t, table), 10*time.Second) // has not seen the term
		}, key, "2^63-1")
	}
}

// A held row whose expires_at is set with psql to NULL or 'infinity':
//   - NULL: the grant has no expiry left to judge it by, and its holder's
//     Renew reports it lost. The key must not stay refused forever as
//     "held by """: the next Acquire grants it, waiting out the old TTL.
//   - 'infinity': Get and Acquire read it as held, not with the server's
//     "cannot subtract infinite timestamps"; once the holder is cleared, the
//     next grant waits out the old TTL, not the 100,000 years left.
//
// Through a session's Acquire too.
func TestForgedExpiry(t *testing.T) {
	table := randomName("forgedexp")
	st := openTable(t, table)
	conn := sqlConn(t)
	set := func(key, sql string) {
		t.Helper()
		if _, err := conn.Exec(ctxFor(t), `UPDATE `+pgx.Identifier{table}.Sanitize()+` SET `+sql+` WHERE key = $1`, key); err != nil {
			t.Fatal(err)
		}
	}
	for _, session := range []bool{false, true} {
		acquire := func(key string) (tenure.Lease, error) {
			b := openTable(t, table)
			if session {
				return storetest.OpenSession(t, b, 2*time.Second).Acquire(ctxFor(t), key, "beta", "")
			}
			return b.Acquire(ctxFor(t), key, "beta", 2*time.Second)
		}
		wantWait := func(what string, l, l2 tenure.Lease) {
			t.Helper()
			if l2.Term <= l.Term || l2.Wait < l.TTL || l2.Wait > l.TTL+10*time.Second {
				t.Fatalf("session %v, %s: granted term %d with Wait %s; want a term above %d and a Wait of the old TTL %s",
					session, what, l2.Term, l2.Wait, l.Term, l.TTL)
			}
		}
		key := fmt.Sprint("null-", session)
		l, err := st.Acquire(ctxFor(t), key, "alpha", 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		set(key, `expires_at = NULL`)
		storetest.Tampered(t, "Renew", st.Renew(ctxFor(t), l), key, tenure.ErrLost)
		l2, err := acquire(key)
		if err != nil {
			t.Fatalf("session %v: Acquire after expires_at was set to NULL: %v", session, err)
		}
		wantWait("expires_at NULL", l, l2)

		key = fmt.Sprint("inf-", session)
		if l, err = st.Acquire(ctxFor(t), key, "alpha", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		set(key, `expires_at = 'infinity'`)
		if r, err := st.Get(ctxFor(t), key); err != nil || r.Holder != "alpha" || r.Remaining < 100*365*24*time.Hour {
			t.Fatalf("Get of a grant expiring at infinity = %+v, %v; want held by alpha for more than a century", r, err)
		}
		var held *tenure.HeldError
		if _, err := acquire(key); !errors.As(err, &held) || held.Record.Holder != "alpha" {
			t.Fatalf("session %v: Acquire of a grant expiring at infinity: %v; want held by alpha", session, err)
		}
		set(key, `holder = '', token = ''`)
		if l2, err = acquire(key); err != nil {
			t.Fatalf("session %v: Acquire after the grant expiring at infinity was cleared: %v", session, err)
		}
		wantWait("expires_at infinity, then cleared", l, l2)
	}
}
