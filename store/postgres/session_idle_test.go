package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/postgres"
	"github.com/tenurehq/tenure/storetest"
)

// BenchmarkSessionIdle measures what one process leading N keys through one
// [tenure.Session] (TTL 10s) costs while idle, counted by the server:
// transactions of the database (pg_stat_database, less the measurement's
// own), CPU of the server's processes, WAL written; and the process's CPU
// (getrusage) and heap. A backend reports its count up to 10s late, so a
// count is good to a few transactions: use a window of a minute for
// figures to quote. Each keep-alive is one transaction, on the session's
// own connection. Run it alone, as
//
//	go test -run '^$' -bench SessionIdle -benchtime 1x ./store/postgres/
//
// TENURE_IDLE_N (comma-separated, default 1,100,1000,10000) and
// TENURE_IDLE_WINDOW (default 30s) change the sizes and the idle window.
func BenchmarkSessionIdle(b *testing.B) {
	ns := []int{1, 100, 1000, 10000}
	if v := os.Getenv("TENURE_IDLE_N"); v != "" {
		ns = ns[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("TENURE_IDLE_N: %v", err)
			}
			ns = append(ns, n)
		}
	}
	window := 30 * time.Second
	if v := os.Getenv("TENURE_IDLE_WINDOW"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil {
			b.Fatalf("TENURE_IDLE_WINDOW: %v", err)
		}
	}
	for _, n := range ns {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			for range b.N {
				idleSession(b, n, window)
			}
		})
	}
}

// serverSample is what the server says it has done so far.
type serverSample struct {
	xacts     int64   // committed and rolled back transactions of the database
	rollbacks int64   // of which rolled back
	keeps     int64   // updates of the sessions table: keep-alives
	vacuums   int64   // autovacuums and autoanalyzes of the lease table
	wal       string  // the WAL position
	cpu       float64 // seconds of CPU of the server's processes
}

func sampleServer(b *testing.B, conn *pgx.Conn, table, sessions string) serverSample {
	b.Helper()
	var s serverSample
	var pids []int32
	err := conn.QueryRow(ctxFor(b), `SELECT xact_commit + xact_rollback, xact_rollback, pg_current_wal_lsn()::text,
	(SELECT array_agg(pid) FROM pg_stat_activity),
	(SELECT coalesce(sum(n_tup_upd), 0) FROM pg_stat_user_tables WHERE relname = $2),
	(SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0) FROM pg_stat_user_tables WHERE relname = $1)
FROM pg_stat_database WHERE datname = current_database()`, table, sessions).Scan(&s.xacts, &s.rollbacks, &s.wal, &pids, &s.keeps, &s.vacuums)
	if err != nil {
		b.Fatal(err)
	}
	for _, pid := range pids {
		s.cpu += procCPU(int(pid))
	}
	return s
}

// procCPU returns the CPU seconds process pid has used, 0 if unknown.
func procCPU(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command (which may hold spaces) in parentheses.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

func rusageCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleSession elects N electors through one session, lets everything
// settle, and measures an idle window.
func idleSession(b *testing.B, n int, window time.Duration) {
	const ttl = 10 * time.Second
	table := randomName("idle_")
	st := openTable(b, table)
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: ttl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("shard-%05d", i)
	}
	elected, stop := storetest.LeadAll(b, sess, "p1", keys, 3*time.Minute)
	defer func() {
		stop()
		_ = sess.Close(context.Background())
	}()
	// Backends report their counts at most once a second, and within 10s
	// of going idle: the setup's transactions are all counted after that.
	time.Sleep(11 * time.Second)
	conn := sqlConn(b)
	idleWindow(b, conn, st, n, window, elected)
}

func idleWindow(b *testing.B, conn *pgx.Conn, st *postgres.Store, n int, window, elected time.Duration) {
	before := sampleServer(b, conn, st.Table(), st.SessionsTable())
	cpu0, t0 := rusageCPU(), time.Now()
	time.Sleep(window)
	after := sampleServer(b, conn, st.Table(), st.SessionsTable())
	cpu1, secs := rusageCPU(), time.Since(t0).Seconds()
	var wal int64
	if err := conn.QueryRow(ctxFor(b), `SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint`, after.wal, before.wal).Scan(&wal); err != nil {
		b.Fatal(err)
	}
	// The first sample's own transaction is among the counted ones.
	reqs := after.xacts - before.xacts - 1
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(reqs)/secs, "req/s")
	b.ReportMetric(100*(cpu1-cpu0).Seconds()/secs, "client-%core")
	b.ReportMetric(100*(after.cpu-before.cpu)/secs, "server-%core")
	b.Logf("N=%d: elected in %s; idle %.1fs: %d server transactions (%.2f/s; %d rolled back; %d keep-alives; %d autovacuums), "+
		"server CPU %.2f%% of a core, WAL %.1f KiB/s; client CPU %.2f%% of a core, heap in use %.1f MiB",
		n, elected.Round(time.Millisecond), secs, reqs, float64(reqs)/secs,
		after.rollbacks-before.rollbacks, after.keeps-before.keeps, after.vacuums-before.vacuums,
		100*(after.cpu-before.cpu)/secs, float64(wal)/1024/secs, 100*(cpu1-cpu0).Seconds()/secs, float64(ms.HeapInuse)/(1<<20))
}
