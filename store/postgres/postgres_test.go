package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/postgres"
	"github.com/tenurehq/tenure/storetest"
)

// One server for the whole package run: tests isolate themselves by key
// and, where it matters, by table. Tests do not run in parallel, since the
// conformance suite restarts the server.
var shared = testserver.SharedPostgres()

func TestMain(m *testing.M) { shared.Main(m) }

// server returns the shared server, or skips (fails in CI) without one.
func server(t testing.TB) *testserver.PostgresServer {
	t.Helper()
	return shared.Get(t)
}

// ctxFor bounds a test's call by 30 s.
func ctxFor(t testing.TB) context.Context { return storetest.Context(t, 30*time.Second) }

// openTable opens a store on table, closed at the end of the test.
func openTable(t testing.TB, table string) *postgres.Store {
	t.Helper()
	return open(t, server(t).URL()+"&"+postgres.TableParam+"="+table)
}

// open opens a store on rawURL, closed at the end of the test.
func open(t testing.TB, rawURL string) *postgres.Store {
	t.Helper()
	return storetest.OpenClosing(t, postgres.Open, rawURL)
}

func randomName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func TestConformance(t *testing.T) {
	s := server(t)
	storetest.Run(t, storetest.Options{
		Open: storetest.OpenURL(s.URL() + "&tenure_table=conformance"),
		Restart: func(t testing.TB) {
			if err := s.Restart(); err != nil {
				t.Fatalf("restarting PostgreSQL: %v", err)
			}
		},
		Tamper:   tamperOn(s, "conformance"),
		Sessions: true,
	})
}

// Behind a pooler that cannot keep prepared statements one sets pgx's
// simple protocol; the store must work the same.
func TestConformanceSimpleProtocol(t *testing.T) {
	s := server(t)
	storetest.Run(t, storetest.Options{
		Open:     storetest.OpenURL(s.URL() + "&tenure_table=simple&default_query_exec_mode=simple_protocol"),
		Sessions: true,
	})
}

func TestSchemes(t *testing.T) {
	s := server(t)
	for _, scheme := range []string{"postgres", "postgresql"} {
		u := scheme + strings.TrimPrefix(s.URL(), "postgres")
		st, err := tenure.Open(ctxFor(t), u)
		if err != nil {
			t.Fatalf("tenure.Open(%s://...): %v", scheme, err)
		}
		r, err := st.Get(ctxFor(t), randomName("k"))
		if err != nil || r.Held() || r.Term != 0 {
			t.Fatalf("Get through %s://: %+v, %v", scheme, r, err)
		}
		_ = st.Close()
	}
}

// Candidates that start at once on a database without the table must all
// get going: the table is created once, the others wait for it.
func TestConcurrentMigration(t *testing.T) {
	table := randomName("race_")
	const n = 8
	stores := make([]*postgres.Store, n)
	for i := range stores {
		stores[i] = openTable(t, table)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = stores[i].Acquire(ctxFor(t), fmt.Sprintf("key-%d", i), "c", time.Minute)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("candidate %d on a fresh table: %v", i, err)
		}
	}
	// Every grant landed in the one table.
	for i := range n {
		r, err := stores[0].Get(ctxFor(t), fmt.Sprintf("key-%d", i))
		if err != nil || r.Holder != "c" || r.Term != 1 {
			t.Errorf("key-%d: %+v, %v", i, r, err)
		}
	}
}

// Tables are separate lease namespaces: the same key in two tables is two
// leases.
func TestTablesAreSeparate(t *testing.T) {
	a, b := openTable(t, randomName("ta_")), openTable(t, randomName("tb_"))
	if a.Table() == b.Table() {
		t.Fatal("random table names collided")
	}
	key := randomName("k")
	la, err := a.Acquire(ctxFor(t), key, "alpha", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctxFor(t), key, "beta", time.Minute)
	if err != nil {
		t.Fatalf("same key in another table: %v", err)
	}
	if la.Term != 1 || lb.Term != 1 {
		t.Fatalf("terms %d and %d, want 1 each", la.Term, lb.Term)
	}
}

func TestBadURLs(t *testing.T) {
	storetest.InvalidURLs(t, "hunter2", func(ctx context.Context, u string) (tenure.Store, error) { return postgres.Open(ctx, u) },
		"postgres://u:hunter2-secret@127.0.0.1:1/db?tenure_table=Bad-Name",
		"postgres://u:hunter2-secret@127.0.0.1:1/db?tenure_table=1abc",
		"postgres://u:hunter2-secret@127.0.0.1:1/db?tenure_table="+strings.Repeat("a", 64),
		"postgres://u:hunter2-secret@127.0.0.1:1/db?tenure_table=a&tenure_table=b",
		"postgres://u:hunter2-secret@127.0.0.1:1/db?sslmode=bogus",
		"mysql://u:hunter2-secret@127.0.0.1:1/db",
	)
}

// No error, whatever went wrong, quotes the password of the URL.
func TestNoPasswordInErrors(t *testing.T) {
	s := server(t)
	const pw = "Sup3r-s3cret-pw"
	wrong := fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", s.User, pw, s.Port)
	storetest.SecretHiddenURL(t, wrong, pw, "tenure/postgres")
}

// With the server down, calls fail with an error naming the server, and a
// server that accepts connections but never answers cannot hold a call
// beyond its context.
func TestServerDown(t *testing.T) {
	const pw = "Sup3r-s3cret-pw"
	storetest.ServerDown(t, pw, func(hostport string) tenure.Store {
		return open(t, fmt.Sprintf("postgres://tenure:%s@%s/postgres?sslmode=disable", pw, hostport))
	})
}

// After the server restarts, the same store handle works again by itself,
// the grant made before is still live, and watches made afterwards work.
func TestRecoversAfterRestart(t *testing.T) {
	s := server(t)
	st := openTable(t, "restart")
	other := openTable(t, "restart")
	key := randomName("k")
	// The LISTEN connection goes with the server: the watch closes.
	l := storetest.Outage(t, st, key, s.Stop)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}

	if err := st.Renew(ctxFor(t), l); err != nil {
		t.Fatalf("Renew after the server came back: %v", err)
	}
	ch, err := other.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Holder != "alpha" || r.Term != l.Term {
		t.Fatalf("watch after restart: %+v", r)
	}
	if err := st.Release(ctxFor(t), l); err != nil {
		t.Fatalf("Release after restart: %v", err)
	}
	storetest.AwaitEnd(t, ch, l, 5*time.Second, "the release after the restart")
}

// Watches of many keys share one LISTEN connection; each hears only its
// own key.
func TestWatchesShareListener(t *testing.T) {
	postgres.SetListenLinger(t, 50*time.Millisecond)
	st := openTable(t, "watch_many")
	writer := openTable(t, "watch_many")
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	keys := []string{randomName("a"), randomName("b"), randomName("c")}
	chans := make([]<-chan tenure.Record, len(keys))
	for i, k := range keys {
		var err error
		if chans[i], err = st.Watch(ctx, k); err != nil {
			t.Fatal(err)
		}
		if r := <-chans[i]; r.Held() {
			t.Fatalf("initial record of %s: %+v", k, r)
		}
	}
	if _, err := writer.Acquire(ctxFor(t), keys[1], "beta", time.Minute); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-chans[1]:
		if r.Key != keys[1] || r.Holder != "beta" {
			t.Fatalf("delivery %+v", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery for the acquired key")
	}
	// The others got nothing: their records did not change. Acquire the
	// last key too and check its delivery is the first one on its channel.
	if _, err := writer.Acquire(ctxFor(t), keys[2], "gamma", time.Minute); err != nil {
		t.Fatal(err)
	}
	if r := <-chans[2]; r.Holder != "gamma" {
		t.Fatalf("delivery on the third key: %+v", r)
	}
	select {
	case r := <-chans[0]:
		t.Fatalf("unchanged key delivered %+v", r)
	default:
	}
	// One LISTEN connection served all three; it goes once they end.
	if n := listeners(t, "watch_many"); n != 1 {
		t.Fatalf("%d LISTEN connections for 3 watches of one store, want 1", n)
	}
	cancel()
	for _, ch := range chans {
		for range ch {
		}
	}
	awaitNoListener(t, "watch_many", "the LISTEN connection stayed open after the last watch ended")
}

// A watch that begins soon after the last one ended, as an elector's
// watch of its own grant begins when it wins, finds the LISTEN connection
// still listening: no backend is started (or ended) on the way, and the
// watch delivers at once.
func TestListenerOutlivesItsLastWatchBriefly(t *testing.T) {
	postgres.SetListenLinger(t, time.Minute)
	st := openTable(t, "watch_linger")
	key := randomName("k")
	storetest.WatchOnce(t, st, key)
	before := listenerPIDs(t, "watch_linger")
	if len(before) != 1 {
		t.Fatalf("LISTEN backends after the first watch ended: %v, want one that lingers", before)
	}
	storetest.WatchOnce(t, st, key)
	if after := listenerPIDs(t, "watch_linger"); !slices.Equal(after, before) {
		t.Fatalf("LISTEN backends %v after the second watch, want the first one's %v", after, before)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	awaitNoListener(t, "watch_linger", "the lingering LISTEN connection outlived the store's Close")
}

// awaitNoListener waits up to 10 s for the server to show no backend
// listening on channel, and fails with failure if one stays.
func awaitNoListener(t *testing.T, channel, failure string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for listeners(t, channel) != 0 {
		if time.Now().After(deadline) {
			t.Fatal(failure)
		}
		time.Sleep(20 * time.Millisecond) // the server's view; no event to wait on
	}
}

// listeners counts the server's connections listening on channel.
func listeners(t *testing.T, channel string) int {
	t.Helper()
	return len(listenerPIDs(t, channel))
}

// listenerPIDs returns the PIDs of the server's backends listening on
// channel, in order.
func listenerPIDs(t *testing.T, channel string) []int32 {
	t.Helper()
	conn, err := pgx.Connect(ctxFor(t), server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pids []int32
	err = conn.QueryRow(ctxFor(t), `SELECT coalesce(array_agg(pid ORDER BY pid), '{}') FROM pg_stat_activity WHERE query = $1 AND pid <> pg_backend_pid()`,
		"LISTEN "+pgx.Identifier{channel}.Sanitize()).Scan(&pids)
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// The connection that created the table has the lease statements prepared
// once the table exists, like every connection opened after: a handoff's
// Release or Acquire never waits to parse and plan its statement.
func TestStatementsPreparedAfterMigration(t *testing.T) {
	st := openTable(t, randomName("prep_"))
	ctx := ctxFor(t)
	if _, err := st.Get(ctx, "k"); err != nil { // creates the table
		t.Fatal(err)
	}
	counts, err := postgres.PreparedOnIdle(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) == 0 {
		t.Fatal("no idle connection after Get")
	}
	for i, n := range counts {
		if n != 4 {
			t.Errorf("idle connection %d has %d of the 4 lease statements prepared", i, n)
		}
	}
}

// A pooled connection that sat idle is handed out without a ping while its
// socket is quiet, and pinged (so the pool replaces it) once the server
// ended it; calls then go on working.
func TestIdleConnectionPingedOnlyWhenEnded(t *testing.T) {
	st := openTable(t, randomName("ping_"))
	ctx := ctxFor(t)
	if _, err := st.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	pids, ping := postgres.IdleConnChecks(ctx, st)
	if len(pids) == 0 {
		t.Fatal("no idle connection after Get")
	}
	for i := range ping {
		if ping[i] {
			t.Fatalf("a healthy idle connection (backend %d) would be pinged", pids[i])
		}
	}
	admin, err := pgx.Connect(ctx, server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, pid := range pids {
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend($1)", int64(pid)); err != nil {
			t.Fatal(err)
		}
	}
	// The server's last message and its close reach the sockets soon after.
	for {
		_, ping = postgres.IdleConnChecks(ctx, st)
		if !slices.Contains(ping, false) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("connections ended by the server still look quiet: %v", ping)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(postgres.PingIdle + 100*time.Millisecond) // so the pool asks
	if _, err := st.Get(ctx, "k"); err != nil {
		t.Fatalf("Get after the server ended the idle connections: %v", err)
	}
}

// The warm-up that fires the notify trigger on a new connection leaves
// nothing behind: no row of key ”, no notification, an idle session, and
// the key's grant as it was.
func TestTriggerWarmUpLeavesNoTrace(t *testing.T) {
	table := randomName("warm_")
	st := openTable(t, table)
	ctx := ctxFor(t)
	l, err := st.Acquire(ctx, "k", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	listen, err := pgx.Connect(ctx, server(t).URL())
	if err != nil {
		t.Fatal(err)
	}
	defer listen.Close(ctx)
	if _, err := listen.Exec(ctx, "LISTEN "+table); err != nil {
		t.Fatal(err)
	}
	status, err := postgres.WarmOne(ctx, st)
	if err != nil || status != 'I' {
		t.Fatalf("after the warm-up: transaction status %q, err %v; want 'I'", status, err)
	}
	// Notifications arrive in commit order: had the warm-up notified, its
	// notification would come before this one.
	if _, err := listen.Exec(ctx, "SELECT pg_notify($1, 'sentinel')", table); err != nil {
		t.Fatal(err)
	}
	n, err := listen.WaitForNotification(ctx)
	if err != nil || n.Payload != "sentinel" {
		t.Fatalf("first notification after the warm-up: %+v, %v; want the sentinel", n, err)
	}
	var rows int
	if err := listen.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE key = ''").Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("rows of key '' after the warm-up: %d, %v", rows, err)
	}
	if r, err := st.Get(ctx, "k"); err != nil || r.Holder != "a" || r.Term != l.Term {
		t.Fatalf("the key after the warm-up: %+v, %v; want held by a in term %d", r, err, l.Term)
	}
}

// TestURLWithoutHostUsesEnvironment: postgres:// with no host takes the
// server, user and password from libpq's environment (PGHOST, PGPORT,
// PGUSER, PGPASSWORD), as psql does. It used to reach pgx as "postgres:",
// which pgx took for a broken keyword=value list: "cannot parse
// `postgres:`: failed to parse as keyword/value".
func TestURLWithoutHostUsesEnvironment(t *testing.T) {
	s := server(t)
	t.Setenv("PGHOST", "127.0.0.1")
	t.Setenv("PGPORT", fmt.Sprint(s.Port))
	t.Setenv("PGUSER", s.User)
	t.Setenv("PGPASSWORD", s.Password)
	t.Setenv("PGDATABASE", "postgres")
	t.Setenv("PGSSLMODE", "disable")
	for _, raw := range []string{"postgres://", "postgresql://?" + postgres.TableParam + "=" + randomName("envurl")} {
		st := open(t, raw)
		if _, err := st.Get(ctxFor(t), storetest.Key(t)); err != nil {
			t.Errorf("%s: Get: %v", raw, err)
		}
	}
}
