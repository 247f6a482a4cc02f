package compare

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	_ "github.com/tenurehq/tenure/store/etcd"
	_ "github.com/tenurehq/tenure/store/postgres"
	_ "github.com/tenurehq/tenure/store/redis"
)

// Settings, from the environment so that `go test` flags stay go test's.
const (
	envTrials = "TENURE_COMPARE_TRIALS" // trials per pair and side; default 20 (3 with -short)
	envIdle   = "TENURE_COMPARE_IDLE"   // idle window; default 10s (2s with -short)
	envOut    = "TENURE_COMPARE_OUT"    // where the table is written; default results.md ("-" for nowhere)
)

// ttl is the lease TTL of every library in every pair.
const ttl = 2 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(etcdChildDir) != "" {
		os.Exit(runEtcdChild())
	}
	os.Exit(m.Run())
}

func settings(t *testing.T) params {
	t.Helper()
	p := params{ttl: ttl, trials: 20, idle: 10 * time.Second, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	if testing.Short() {
		p.trials, p.idle = 3, 2*time.Second
	}
	if v := os.Getenv(envTrials); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number", envTrials, v)
		}
		p.trials = n
	}
	if v := os.Getenv(envIdle); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond {
			t.Fatalf("%s=%q: want a duration of at least 100ms", envIdle, v)
		}
		p.idle = d
	}
	return p
}

// budget is how long a run may take, with a 50% margin: per trial and
// side at most about 4 s (two settles, a handoff, a TTL of failover and
// polling), per side one idle window after a TTL of settling.
func (p params) budget() time.Duration {
	const pairs, sides = 4, 2
	run := time.Duration(p.trials*pairs*sides)*(2*p.ttl) + pairs*sides*(p.idle+2*p.ttl+2*time.Second)
	return run * 3 / 2
}

// TestCompare runs every pair and prints the table (and writes it to
// results.md unless -short or TENURE_COMPARE_OUT says otherwise). It fails
// if a library does not hand over or fail over at all, or a waiting
// candidate leads before the leader let go; whether tenure meets its
// targets is reported in the table, not asserted.
func TestCompare(t *testing.T) {
	p := settings(t)
	if f := flag.Lookup("test.timeout"); f != nil {
		if limit, err := time.ParseDuration(f.Value.String()); err == nil && limit > 0 && limit < p.budget() {
			t.Fatalf("%d trials and a %s idle window need about %s; run with -timeout %s (see README.md)",
				p.trials, p.idle, p.budget().Round(time.Minute)*2/3, (p.budget() + 5*time.Minute).Round(5*time.Minute))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	rep := Report{
		Date:    time.Now(),
		Machine: Machine(),
		Go:      runtime.Version(),
		TTL:     p.ttl,
		Trials:  p.trials,
		Idle:    p.idle,
	}
	all := comparePairs(ctx, p)
	measured := 0 // pairs that ran to the end (not failed, not skipped)
	for _, pr := range all {
		t.Run(pr.name, func(t *testing.T) {
			sides, setup := pr.run(t)
			res := runPair(t, ctx, p, pr.name, sides)
			rep.Setup = append(rep.Setup, setup)
			rep.Rows = append(rep.Rows, rows(pr.name, pr.other, res)...)
			measured++
		})
	}
	rep.Checks = checks(rep.Rows, p.ttl)
	rep.Notes = notes(p)
	writeReport(t, rep, measured == len(all))
}

// pair is one side-by-side comparison: tenure and another library on one
// server that run starts.
type pair struct {
	name, other string
	run         func(t *testing.T) ([2]side, string)
}

// comparePairs lists the pairs TestCompare runs, in order.
func comparePairs(ctx context.Context, p params) []pair {
	return []pair{
		{"etcd", "etcd concurrency.Election", func(t *testing.T) ([2]side, string) {
			srv := startEtcd(t)
			return [2]side{
				{name: "tenure store/etcd", poll: 0, requests: srv.requests, c: &tenureContender{ttl: p.ttl,
					open: openURL("etcd://" + srv.endpoint + "/compare-tenure")}},
				{name: "etcd concurrency.Election", poll: 0, requests: srv.requests, c: &electionContender{endpoint: srv.endpoint, ttl: p.ttl}},
			}, "etcd: tenure store/etcd vs go.etcd.io/etcd/client/v3/concurrency Election v3.7.3, one embedded etcd v3.7.3 server in a child process; requests = gRPC messages received (grpc_server_msg_received_total)"
		}},
		{"postgres", "cirello.io/pglock", func(t *testing.T) ([2]side, string) {
			srv := startPostgres(t, ctx)
			pg := &pglockContender{url: srv.url, ttl: p.ttl}
			if err := pg.createTable(); err != nil {
				t.Fatalf("pglock table: %v", err)
			}
			return [2]side{
				{name: "tenure store/postgres", poll: 0, requests: srv.requests, c: &tenureContender{ttl: p.ttl, open: openURL(srv.url)}},
				// pglock's waiter retries once per lease duration.
				{name: "cirello.io/pglock", poll: p.ttl, requests: srv.requests, c: pg},
			}, "postgres: tenure store/postgres vs cirello.io/pglock v1.16.2 (lib/pq, lease TTL, heartbeat TTL/4), one PostgreSQL 15 server; requests = statements in pg_stat_statements (BEGIN and COMMIT count)"
		}},
		{"redis", "redsync", func(t *testing.T) ([2]side, string) {
			srv := testserver.Redis(t, false)
			counter := redisCounterFor(t, srv.Addr, srv.Password)
			return [2]side{
				{name: "tenure store/redis", poll: 0, requests: counter.requests, c: &tenureContender{ttl: p.ttl, open: openURL(srv.URL(0))}},
				// redsync retries every 50–250 ms.
				{name: "go-redsync/redsync/v4", poll: 250 * time.Millisecond, requests: counter.requests,
					c: &redsyncContender{addr: srv.Addr, password: srv.Password, ttl: p.ttl}},
			}, "redis: tenure store/redis vs github.com/go-redsync/redsync/v4 v4.18.1 (one pool, expiry TTL, Lock retried 32× at 50–250 ms in a loop, Extend every TTL/3), one redis-server; requests = INFO commandstats calls"
		}},
		{"kubernetes", "client-go leaderelection", func(t *testing.T) ([2]side, string) { return kubePair(t, p) }},
	}
}

// writeReport prints the table and writes it to $TENURE_COMPARE_OUT, or
// to results.md after a full run in which every pair was measured.
func writeReport(t *testing.T, rep Report, all bool) {
	md := rep.Markdown()
	fmt.Println(md)
	out := os.Getenv(envOut)
	if out == "" && !testing.Short() && all {
		out = "results.md"
	}
	if out != "" && out != "-" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("table written to %s", out)
	}
}

// openURL opens a new store handle per candidate through tenure.Open.
func openURL(u string) func(ctx context.Context) (tenure.Store, bool, error) {
	return func(ctx context.Context) (tenure.Store, bool, error) {
		st, err := tenure.Open(ctx, u)
		return st, true, err
	}
}

// Metric names, shared by rows and checks.
const (
	mHandoff  = "graceful handoff"
	mFailover = "crash failover"
	mRequests = "idle store requests per elector"
	mCPU      = "idle CPU per elector"
)

// rows turns a pair's measurements into table rows.
func rows(pair, other string, r pairResult) []Row {
	mk := func(metric, unit string, t, o []float64) Row {
		return Row{Pair: pair, Metric: metric, Unit: unit, Tenure: Summarize(t), Other: Summarize(o), OtherName: other}
	}
	return []Row{
		mk(mHandoff, "ms", Millis(r.handoff[0]), Millis(r.handoff[1])),
		mk(mFailover, "ms", Millis(r.failover[0]), Millis(r.failover[1])),
		mk(mRequests, "req/s", r.idle[0].requests, r.idle[1].requests),
		mk(mCPU, "CPU ms/s", r.idle[0].cpu, r.idle[1].cpu),
	}
}

// checks evaluates the targets against the rows.
func checks(rows []Row, ttl time.Duration) []Check {
	find := func(pair, metric string) (Row, bool) {
		for _, r := range rows {
			if r.Pair == pair && r.Metric == metric {
				return r, true
			}
		}
		return Row{}, false
	}
	var cs []Check
	if r, ok := find("kubernetes", mHandoff); ok {
		q, _ := Ratio(r.Other.Median, r.Tenure.Median)
		cs = append(cs, Check{
			Target: "graceful handoff ≥ 10× faster than client-go leaderelection (medians)",
			Met:    r.Tenure.Median*10 <= r.Other.Median,
			Detail: fmt.Sprintf("tenure %s ms vs client-go %s ms: %.1f× faster; p99 %s vs %s ms", num(r.Tenure.Median), num(r.Other.Median), q, num(r.Tenure.P99), num(r.Other.P99)),
		})
	}
	if r, ok := find("etcd", mHandoff); ok {
		cs = append(cs, Check{
			Target: "graceful handoff no slower than etcd's own Election on the same etcd (medians)",
			Met:    r.Tenure.Median <= r.Other.Median,
			Detail: fmt.Sprintf("tenure %s ms vs Election %s ms; p99 %s vs %s ms", num(r.Tenure.Median), num(r.Other.Median), num(r.Tenure.P99), num(r.Other.P99)),
		})
	}
	bound := float64(ttl+250*time.Millisecond) / float64(time.Millisecond)
	for _, pair := range []string{"etcd", "postgres", "redis", "kubernetes"} {
		if r, ok := find(pair, mFailover); ok {
			cs = append(cs, Check{
				Target: fmt.Sprintf("%s: crash failover within TTL + 250 ms = %s ms (p99)", pair, num(bound)),
				Met:    r.Tenure.P99 <= bound,
				Detail: fmt.Sprintf("tenure p99 %s ms (median %s); %s p99 %s ms (median %s)", num(r.Tenure.P99), num(r.Tenure.Median), r.OtherName, num(r.Other.P99), num(r.Other.Median)),
			})
		}
	}
	for _, pair := range []string{"etcd", "postgres", "redis", "kubernetes"} {
		if r, ok := find(pair, mRequests); ok {
			cs = append(cs, Check{
				Target: fmt.Sprintf("%s: idle store load no higher than %s (mean over the window)", pair, r.OtherName),
				Met:    r.Tenure.Mean <= r.Other.Mean,
				Detail: fmt.Sprintf("tenure %s req/s vs %s req/s per elector", num(r.Tenure.Mean), num(r.Other.Mean)),
			})
		}
	}
	return cs
}

// notes explains the method under the table.
func notes(p params) []string {
	return []string{
		fmt.Sprintf("Each trial uses a fresh key: candidate a leads; b starts and waits %s plus a uniformly random part of its polling cycle; a releases and the handoff runs until b's leader code starts; c starts and waits %s plus a random part of max(polling cycle, TTL/3); b crashes (stops renewing and talking to the server without releasing) and the failover runs until c's leader code starts. Tenure and the other library alternate trial by trial.", p.settle(), p.settle()),
		"tenure runs with its defaults for the TTL (renew every TTL/3, renew deadline 2/3 TTL, retry TTL/15, request timeout TTL/5, jitter 1.2), one store handle (connection) per candidate, through tenure.Open URLs; a tenure candidate is crashed by failing its store calls, client-go's by failing its Lease requests, Election's by closing its client, pglock's by closing its *sql.DB, redsync's by ending its renew loop.",
		fmt.Sprintf("Idle figures: a leader and a follower of one library alone run for a TTL, then %s are split into %d windows; per window, server-side requests and process CPU (getrusage) divided by the window and by 2 electors. The etcd server runs in a child process; PostgreSQL and Redis are separate processes; the kube-apiserver and its etcd are separate processes.", p.idle, p.trials),
		"p99 is the nearest-rank percentile: with fewer than 100 samples it is the largest sample. Ratios are tenure/other: below 1 means tenure is faster or cheaper.",
	}
}
