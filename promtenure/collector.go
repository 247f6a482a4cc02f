package promtenure

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/leadership"
)

// Reasons of tenure_leadership_lost_total: why a term of this candidate
// ended.
const (
	ReasonLost          = "lost"           // the store says another grant replaced ours ([tenure.ErrLost])
	ReasonRenewDeadline = "renew_deadline" // no renewal succeeded in time ([tenure.ErrRenewDeadline])
	ReasonStalled       = "stalled"        // the task stopped reporting progress ([tenure.ErrStalled])
	ReasonTaskReturned  = "task_returned"  // the task returned while leading; the lease was released
	ReasonShutdown      = "shutdown"       // the context of Run or Do ended; the lease was released
)

// Reasons of tenure_acquire_failures_total.
const (
	FailureHeld  = "held"  // somebody else holds the key
	FailureError = "error" // the store failed or timed out
)

// renewBuckets spans a local store's sub-millisecond renewals to a remote
// one's multi-second worst case.
var renewBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Collector is a [prometheus.Collector] of one key's leadership metrics,
// fed by an elector's events ([Collector.OnEvent]) and the records an
// observer sees
// ([Collector.Observe], [Collector.Run]). Create it with [New] and register
// it once. Its methods are safe for concurrent use and never block on the
// store; OnEvent's function takes only a short lock.
type Collector struct {
	mu    sync.Mutex
	track leadership.Tracker // guarded by mu

	masterStatus    prometheus.Gauge
	isLeader        prometheus.Gauge
	term            prometheus.Gauge
	transitions     prometheus.Counter
	attempts        prometheus.Counter
	acquireFailures *prometheus.CounterVec
	renewLatency    prometheus.Histogram
	renewFailures   prometheus.Counter
	lost            *prometheus.CounterVec
	stalls          prometheus.Counter
	overruns        prometheus.Counter
	renewed         atomic.Bool // renewLatency has an observation: Collect exports it

	key string
	all []prometheus.Collector
}

// New returns a collector for key. Every metric but the renewal
// histogram is present from the start (counters at 0, not leading), so
// followers and observers export them too. The histogram is exported from
// the first renewal on: an observer, and an elector leading through a
// [tenure.Session] (whose session renews for it), never have one, and
// its 17 series would be half of each key's, for a process leading
// thousands of keys in one session.
func New(key string) *Collector {
	k := prometheus.Labels{"key": key}
	c := &Collector{key: key}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, ConstLabels: k, Help: help})
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, ConstLabels: k, Help: help})
	}
	// byReason's counters start with every reason present, at 0.
	byReason := func(name, help string, reasons ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, ConstLabels: k, Help: help}, []string{"reason"})
		for _, r := range reasons {
			v.WithLabelValues(r)
		}
		return v
	}
	c.masterStatus = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "leader_election_master_status", ConstLabels: prometheus.Labels{"name": key},
		Help: "1 while this process leads the election called name, else 0 (the name client-go uses).",
	})
	c.isLeader = gauge("tenure_is_leader",
		"1 while this process leads key, else 0.")
	c.term = gauge("tenure_term",
		"The term of the current leader of key as seen here, or of the last one when nobody leads.")
	c.transitions = counter("tenure_leadership_transitions_total",
		"New leadership terms of key seen here, after the first one.")
	c.attempts = counter("tenure_acquire_attempts_total",
		"Acquire requests this process sent for key.")
	c.acquireFailures = byReason("tenure_acquire_failures_total",
		"Acquire requests for key that did not grant it, by reason (held, error).",
		FailureHeld, FailureError)
	c.renewLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "tenure_renew_latency_seconds", ConstLabels: k, Buckets: renewBuckets,
		Help: "Round trip of successful lease renewals of key.",
	})
	c.renewFailures = counter("tenure_renew_failures_total",
		"Renewals of key that failed with a transient error and were retried.")
	c.lost = byReason("tenure_leadership_lost_total",
		"Terms of this process on key that ended, by reason (lost, renew_deadline, stalled, task_returned, shutdown).",
		ReasonLost, ReasonRenewDeadline, ReasonStalled, ReasonTaskReturned, ReasonShutdown)
	c.stalls = counter("tenure_task_stalls_total",
		"Leader tasks of key that stopped reporting progress and lost leadership.")
	c.overruns = counter("tenure_task_overruns_total",
		"Leader tasks of key still running StopTimeout after their context was cancelled.")
	c.all = []prometheus.Collector{c.masterStatus, c.isLeader, c.term, c.transitions, c.attempts,
		c.acquireFailures, c.renewLatency, c.renewFailures, c.lost, c.stalls, c.overruns}
	return c
}

// Describe implements [prometheus.Collector].
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.all {
		m.Describe(ch)
	}
}

// Collect implements [prometheus.Collector]. It leaves the renewal
// histogram out until it has an observation (see [New]).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	renewed := c.renewed.Load()
	for _, m := range c.all {
		if m != prometheus.Collector(c.renewLatency) || renewed {
			m.Collect(ch)
		}
	}
}

// OnEvent returns a function to put in [tenure.Config.OnEvent]; it counts
// the elector's events and then calls next (if not nil), so an existing
// OnEvent keeps working. The function never blocks.
func (c *Collector) OnEvent(next func(tenure.Event)) func(tenure.Event) {
	return func(ev tenure.Event) {
		if ev.Key == c.key {
			c.event(ev)
		}
		if next != nil {
			next(ev)
		}
	}
}

func (c *Collector) event(ev tenure.Event) {
	switch ev.Kind {
	case tenure.EventElected:
		c.leading(true)
		c.see(leadership.FromElector, ev.Identity, ev.Term)
	case tenure.EventLost, tenure.EventReleased:
		c.leading(false)
		c.lost.WithLabelValues(reason(ev)).Inc()
		if errors.Is(ev.Err, tenure.ErrStalled) {
			c.stalls.Inc()
		}
		c.see(leadership.FromElector, "", ev.Term)
	case tenure.EventLeaderChanged:
		c.see(leadership.FromElector, ev.Holder, ev.Term)
	case tenure.EventRenewFailed:
		c.renewFailures.Inc()
	case tenure.EventAcquired:
		c.attempts.Inc()
	case tenure.EventAcquireFailed:
		c.attempts.Inc()
		if errors.Is(ev.Err, tenure.ErrHeld) {
			c.acquireFailures.WithLabelValues(FailureHeld).Inc()
		} else {
			c.acquireFailures.WithLabelValues(FailureError).Inc()
		}
	case tenure.EventRenewed:
		c.observeRenew(ev.Took)
	case tenure.EventTaskOverrun:
		c.overruns.Inc()
	}
}

// reason is the tenure_leadership_lost_total label of an EventLost or
// EventReleased.
func reason(ev tenure.Event) string {
	switch {
	case errors.Is(ev.Err, tenure.ErrStalled):
		return ReasonStalled
	case errors.Is(ev.Err, tenure.ErrRenewDeadline):
		return ReasonRenewDeadline
	case errors.Is(ev.Err, tenure.ErrLost):
		return ReasonLost
	case ev.Err == nil:
		return ReasonTaskReturned
	}
	return ReasonShutdown
}

func (c *Collector) leading(on bool) {
	v := 0.0
	if on {
		v = 1
	}
	c.masterStatus.Set(v)
	c.isLeader.Set(v)
}

// see applies one sighting of the key's holder and term, from src.
func (c *Collector) see(src leadership.Source, holder string, term uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.track.Transitions
	if c.track.Apply(src, holder, term) == leadership.Same {
		return
	}
	c.term.Set(float64(c.track.Term))
	c.transitions.Add(float64(c.track.Transitions - before))
}

// Observe counts one record of the key, as [tenure.Observer.Changes]
// delivers them: the term and the transitions. An observer that never
// campaigns feeds its collector this way; an elector's collector may too,
// to see changes while it is not campaigning. A record of a term older
// than the previous record observed is what the observer delivers once
// the store showed it alone for a TTL (a term written far above the key's
// counter has gone): it is counted as the current term, a transition.
// One older than an elector's event only is ignored, read before it.
func (c *Collector) Observe(r tenure.Record) {
	if r.Key == "" || r.Key == c.key {
		c.see(leadership.FromObserver, r.Holder, r.Term)
	}
}

// Run follows the key in store with a [tenure.Observer] and passes every
// record to [Collector.Observe] until ctx is done; then it returns ctx's
// error. Store errors are logged by the observer and retried. A program
// that already follows the key (for an httpview view, say) passes its
// records to Observe instead, so the key is watched once.
func (c *Collector) Run(ctx context.Context, store tenure.Reader) error {
	obs := tenure.Observer{Store: store, Key: c.key}
	for r := range obs.Changes(ctx) {
		c.Observe(r)
	}
	return ctx.Err()
}

// observeRenew records one renewal's round trip.
func (c *Collector) observeRenew(d time.Duration) {
	c.renewLatency.Observe(d.Seconds())
	c.renewed.Store(true)
}
