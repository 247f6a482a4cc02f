package promtenure

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenurehq/tenure"
)

// SessionCollector exports the health of one [tenure.Session]: its
// keep-alives, which renew every key the session leads at once, and how
// many keys it holds. A process leading thousands of keys through a
// session (electors or [tenure.Session.Campaign]) exports these few
// series beside or instead of a [Collector] per key (about 15 series
// each). Its methods are safe for concurrent use.
type SessionCollector struct {
	latency  prometheus.Histogram
	failures prometheus.Counter
	ends     *prometheus.CounterVec
	grants   prometheus.Gauge
	gone     prometheus.Counter
	all      []prometheus.Collector
}

// NewSession returns a collector for a session, its series labelled
// session=name (a name of the caller's choosing, for a process with more
// than one session). Every metric is present from the start. Feed it with
// [SessionCollector.OnKeepAlive].
func NewSession(name string) *SessionCollector {
	l := prometheus.Labels{"session": name}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, ConstLabels: l, Help: help})
	}
	c := &SessionCollector{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tenure_session_keepalive_latency_seconds", ConstLabels: l, Buckets: renewBuckets[:],
			Help: "Round trip of the session's successful keep-alives, each of which renews every grant in it.",
		}),
		failures: counter("tenure_session_keepalive_failures_total",
			"Keep-alives of the session that failed with a transient error and were retried."),
		ends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tenure_session_ends_total", ConstLabels: l,
			Help: "Store sessions that ended with every grant in them, by reason (lost, renew_deadline).",
		}, []string{"reason"}),
		grants: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tenure_session_grants", ConstLabels: l,
			Help: "Grants the session's store session held after its last keep-alive.",
		}),
		gone: counter("tenure_session_grants_gone_total",
			"Grants a keep-alive found taken away from outside (each one's term ended)."),
	}
	c.ends.WithLabelValues(ReasonLost)
	c.ends.WithLabelValues(ReasonRenewDeadline)
	c.all = []prometheus.Collector{c.latency, c.failures, c.ends, c.grants, c.gone}
	return c
}

// Describe implements [prometheus.Collector].
func (c *SessionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.all {
		m.Describe(ch)
	}
}

// Collect implements [prometheus.Collector].
func (c *SessionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range c.all {
		m.Collect(ch)
	}
}

// OnKeepAlive returns a function to put in
// [tenure.SessionConfig.OnKeepAlive]; it counts the keep-alive and then
// calls next (if not nil). The function never blocks.
func (c *SessionCollector) OnKeepAlive(next func(tenure.SessionKeepAlive)) func(tenure.SessionKeepAlive) {
	return func(k tenure.SessionKeepAlive) {
		c.keepAlive(k)
		if next != nil {
			next(k)
		}
	}
}

func (c *SessionCollector) keepAlive(k tenure.SessionKeepAlive) {
	c.grants.Set(float64(k.Grants))
	c.gone.Add(float64(k.Gone))
	switch {
	case k.Err == nil:
		c.latency.Observe(k.Took.Seconds())
	case errors.Is(k.Err, tenure.ErrRenewDeadline):
		c.ends.WithLabelValues(ReasonRenewDeadline).Inc()
	case errors.Is(k.Err, tenure.ErrLost):
		c.ends.WithLabelValues(ReasonLost).Inc()
	default:
		c.failures.Inc()
	}
}
