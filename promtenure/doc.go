// Package promtenure exports tenure's leadership metrics to Prometheus. It
// is its own package so that the root package stays standard-library only:
// only programs that import promtenure depend on
// github.com/prometheus/client_golang.
//
// A [Collector] covers one key. Wire it into an elector's config, register
// it, and serve the registry (for example at httpview's /metrics):
//
//	metrics := promtenure.New(cfg.Key)
//	cfg.OnEvent = metrics.OnEvent(cfg.OnEvent) // the elector's events feed it
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics)
//	view, _ := httpview.New(httpview.Options{..., Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
//
// An observer that never campaigns runs [Collector.Run] on its store
// instead; it exports the same metrics, never leading.
//
// A process leading many keys through a [tenure.Session] exports the
// session's health with one [SessionCollector] (NewSession, fed by
// [tenure.SessionConfig.OnKeepAlive]): tenure_session_keepalive_latency_seconds,
// tenure_session_keepalive_failures_total, tenure_session_ends_total{reason},
// tenure_session_grants and tenure_session_grants_gone_total, labelled
// session, a handful of series whatever the number of keys.
//
// # Metrics
//
// Every metric but the renewal histogram is present from the start, on
// followers and observers too.
//
//   - leader_election_master_status{name}: gauge, 1 while this process
//     leads; name is the key. The name and label client-go uses, so
//     existing dashboards and alerts keep working.
//   - tenure_is_leader{key}: the same gauge under tenure's own name.
//   - tenure_term{key}: the term of the leader seen (of the last one while
//     nobody leads).
//   - tenure_leadership_transitions_total{key}: new leadership terms seen,
//     after the first.
//   - tenure_acquire_attempts_total{key} and
//     tenure_acquire_failures_total{key,reason}: Acquire requests and those
//     that granted nothing, reason "held" or "error" (from the elector's
//     events: 0 on an observer).
//   - tenure_renew_latency_seconds{key}: histogram of successful renewal
//     round trips, from the first one on (from the elector's events: never
//     on an observer nor on an elector that leads through a
//     [tenure.Session], whose session renews for it; its 17 series per key
//     would be half of a scrape of thousands of keys).
//   - tenure_renew_failures_total{key}: transient renewal failures retried.
//   - tenure_leadership_lost_total{key,reason}: this process's terms that
//     ended, by reason: lost, renew_deadline, stalled, task_returned,
//     shutdown.
//   - tenure_task_stalls_total{key}, tenure_task_overruns_total{key}:
//     tasks that stopped reporting progress, and tasks still running
//     StopTimeout after their context was cancelled.
//
// # Alerting
//
// Scrape every candidate and alert when a group does not have exactly one
// leader for a minute (K is the key):
//
//   - alert: LeaderElectionNotExactlyOneLeader
//     expr: sum(leader_election_master_status{name="K"}) != 1
//     for: 1m
//
// The sum is 0 while nobody leads (a stuck election, a lost store) and 2
// or more while two processes believe they lead, which with a correct
// store and clocks within the assumed bounds lasts at most a renew
// deadline; fencing with the term is what protects the resource then.
package promtenure
