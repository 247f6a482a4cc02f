// Package compare measures tenure side by side with the leader-election
// libraries its users would otherwise pick, each pair on one real server
// and at one TTL:
//
//   - tenure store/etcd against go.etcd.io/etcd/client/v3/concurrency
//     Election, on one etcd server (embedded etcd, run in a child process so
//     its CPU is not counted as the electors');
//   - tenure store/postgres against cirello.io/pglock, on one PostgreSQL
//     server with pg_stat_statements loaded;
//   - tenure store/redis against github.com/go-redsync/redsync/v4 with the
//     renew loop (Extend every TTL/3) its users write themselves, on one
//     redis-server;
//   - tenure store/k8s against k8s.io/client-go tools/leaderelection
//     (LeaseLock), on Leases of one real kube-apiserver with its own etcd.
//
// For every pair it reports the median and 99th percentile of graceful
// handoff (the leader releases until the waiting candidate's leader code
// starts) and crash failover (the holder stops renewing without releasing
// until the waiting candidate's leader code starts), the store requests per
// second and the CPU each idle elector costs, and the ratio tenure/other.
// The measurement itself lives in the package's tests (it needs the test
// servers of internal/testserver); README.md has the command. This file's
// package holds the statistics and the table, which are plain code with
// their own tests.
//
// # Guarantees
//
//   - Every pair runs against the same server process with the same TTL,
//     and trials of the two sides alternate, so a change in machine load
//     during the run falls on both sides alike.
//   - Each trial uses a fresh key and fresh clients (one client per
//     candidate, as separate processes would have), and the release or
//     crash happens at a random point of the waiting candidate's polling
//     cycle, so polling libraries are measured over their whole cycle, not
//     at a lucky or unlucky phase.
//   - Request counts come from the server (etcd's gRPC metrics, Redis
//     INFO commandstats, pg_stat_statements, the API server's
//     apiserver_request_total for leases).
//
// # Non-guarantees
//
//   - Figures come from a shared 2-core machine: they show orders of
//     magnitude and who wins, not exact latencies. Percentiles of 20 trials
//     are rough; p99 of n < 100 samples is the largest sample.
//   - CPU is the whole benchmark process's CPU (getrusage) during the idle
//     window, divided by the number of electors: every server (etcd,
//     PostgreSQL, Redis, kube-apiserver) runs outside the process and its
//     CPU is not counted.
//   - pg_stat_statements counts statements, so a transaction's BEGIN and
//     COMMIT count as requests; the etcd figure counts gRPC messages
//     received, so a lease keep-alive on an open stream counts as one.
package compare
