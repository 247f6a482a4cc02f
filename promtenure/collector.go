package promtenure

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
var renewBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Collector is a [prometheus.Collector] of one key's leadership metrics,
// fed by an elector's events ([Collector.OnEvent]) and the records an
// observer sees
// ([Collector.Observe], [Collector.Run]). Create it with [New] and register
// it once. Its methods are safe for concurrent use and never block on the
// store; OnEvent's function takes only a short lock.
//
// It keeps its values in a few counters of its own and makes the series
// at each scrape, from descriptions every Collector shares, so a process
// watching thousands of keys pays about 0.36 KiB per key. It is an
// unchecked collector (Describe sends nothing, as the client library
// allows for that): a registry cannot tell two Collectors of one key
// apart at registration, and its scrape fails with a duplicate series
// instead.
type Collector struct {
	mu    sync.Mutex
	track leadership.Tracker // guarded by mu
	// term and transitions are the track's, for Collect; guarded by mu.
	term, transitions uint64

	leader        atomic.Bool
	attempts      atomic.Uint64
	acquireHeld   atomic.Uint64
	acquireError  atomic.Uint64
	renewFailures atomic.Uint64
	lost          [len(lostReasons)]atomic.Uint64
	stalls        atomic.Uint64
	overruns      atomic.Uint64

	hmu     sync.Mutex // guards the renewal histogram
	renewed uint64     // renewals observed; 0: the histogram is left out
	sum     float64
	buckets [len(renewBuckets)]uint64 // renewals up to each bound, not cumulative

	key string
}

// The descriptions of a Collector's metrics, shared by every Collector:
// the key is a variable label.
var (
	descMasterStatus = prometheus.NewDesc("leader_election_master_status",
		"1 while this process leads the election called name, else 0 (the name client-go uses).", []string{"name"}, nil)
	descIsLeader = prometheus.NewDesc("tenure_is_leader",
		"1 while this process leads key, else 0.", []string{"key"}, nil)
	descTerm = prometheus.NewDesc("tenure_term",
		"The term of the current leader of key as seen here, or of the last one when nobody leads.", []string{"key"}, nil)
	descTransitions = prometheus.NewDesc("tenure_leadership_transitions_total",
		"New leadership terms of key seen here, after the first one.", []string{"key"}, nil)
	descAttempts = prometheus.NewDesc("tenure_acquire_attempts_total",
		"Acquire requests this process sent for key.", []string{"key"}, nil)
	descAcquireFailures = prometheus.NewDesc("tenure_acquire_failures_total",
		"Acquire requests for key that did not grant it, by reason (held, error).", []string{"key", "reason"}, nil)
	descRenewLatency = prometheus.NewDesc("tenure_renew_latency_seconds",
		"Round trip of successful lease renewals of key.", []string{"key"}, nil)
	descRenewFailures = prometheus.NewDesc("tenure_renew_failures_total",
		"Renewals of key that failed with a transient error and were retried.", []string{"key"}, nil)
	descLost = prometheus.NewDesc("tenure_leadership_lost_total",
		"Terms of this process on key that ended, by reason (lost, renew_deadline, stalled, task_returned, shutdown).", []string{"key", "reason"}, nil)
	descStalls = prometheus.NewDesc("tenure_task_stalls_total",
		"Leader tasks of key that stopped reporting progress and lost leadership.", []string{"key"}, nil)
	descOverruns = prometheus.NewDesc("tenure_task_overruns_total",
		"Leader tasks of key still running StopTimeout after their context was cancelled.", []string{"key"}, nil)
)

// New returns a collector for key. Every metric but the renewal
// histogram is present from the start (counters at 0, not leading), so
// followers and observers export them too. The histogram is exported from
// the first renewal on: an observer, and an elector leading through a
// [tenure.Session] (whose session renews for it), never have one, and
// its 17 series would be half of each key's, for a process leading
// thousands of keys in one session.
func New(key string) *Collector { return &Collector{key: key} }

// Describe implements [prometheus.Collector]. It sends nothing: see
// [Collector].
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect implements [prometheus.Collector]. It leaves the renewal
// histogram out until it has an observation (see [New]).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	k := c.key
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	leading := 0.0
	if c.leader.Load() {
		leading = 1
	}
	c.mu.Lock()
	term, transitions := c.term, c.transitions
	c.mu.Unlock()
	gauge(descMasterStatus, leading, k)
	gauge(descIsLeader, leading, k)
	gauge(descTerm, float64(term), k)
	counter(descTransitions, transitions, k)
	counter(descAttempts, c.attempts.Load(), k)
	counter(descAcquireFailures, c.acquireHeld.Load(), k, FailureHeld)
	counter(descAcquireFailures, c.acquireError.Load(), k, FailureError)
	if h := c.histogram(); h != nil {
		ch <- h
	}
	counter(descRenewFailures, c.renewFailures.Load(), k)
	for i, r := range lostReasons {
		counter(descLost, c.lost[i].Load(), k, r)
	}
	counter(descStalls, c.stalls.Load(), k)
	counter(descOverruns, c.overruns.Load(), k)
}

// histogram is the renewal histogram now, nil before the first renewal.
func (c *Collector) histogram() prometheus.Metric {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if c.renewed == 0 {
		return nil
	}
	cum := make(map[float64]uint64, len(renewBuckets))
	var n uint64
	for i, b := range renewBuckets {
		n += c.buckets[i]
		cum[b] = n
	}
	return prometheus.MustNewConstHistogram(descRenewLatency, c.renewed, c.sum, cum, c.key)
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
		c.lost[reason(ev)].Add(1)
		if errors.Is(ev.Err, tenure.ErrStalled) {
			c.stalls.Add(1)
		}
		c.see(leadership.FromElector, "", ev.Term)
	case tenure.EventLeaderChanged:
		c.see(leadership.FromElector, ev.Holder, ev.Term)
	case tenure.EventRenewFailed:
		c.renewFailures.Add(1)
	case tenure.EventAcquired:
		c.attempts.Add(1)
	case tenure.EventAcquireFailed:
		c.attempts.Add(1)
		if errors.Is(ev.Err, tenure.ErrHeld) {
			c.acquireHeld.Add(1)
		} else {
			c.acquireError.Add(1)
		}
	case tenure.EventRenewed:
		c.observeRenew(ev.Took)
	case tenure.EventTaskOverrun:
		c.overruns.Add(1)
	}
}

// Indexes of lostReasons.
const (
	iLost = iota
	iRenewDeadline
	iStalled
	iTaskReturned
	iShutdown
)

// lostReasons are tenure_leadership_lost_total's reasons, by index.
var lostReasons = [...]string{
	iLost: ReasonLost, iRenewDeadline: ReasonRenewDeadline, iStalled: ReasonStalled,
	iTaskReturned: ReasonTaskReturned, iShutdown: ReasonShutdown,
}

// reason is the index in lostReasons of the tenure_leadership_lost_total
// label of an EventLost or EventReleased.
func reason(ev tenure.Event) int {
	switch {
	case errors.Is(ev.Err, tenure.ErrStalled):
		return iStalled
	case errors.Is(ev.Err, tenure.ErrRenewDeadline):
		return iRenewDeadline
	case errors.Is(ev.Err, tenure.ErrLost):
		return iLost
	case ev.Err == nil:
		return iTaskReturned
	}
	return iShutdown
}

func (c *Collector) leading(on bool) { c.leader.Store(on) }

// see applies one sighting of the key's holder and term, from src.
func (c *Collector) see(src leadership.Source, holder string, term uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.track.Transitions
	if c.track.Apply(src, holder, term) == leadership.Same {
		return
	}
	c.term = c.track.Term
	c.transitions += c.track.Transitions - before
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
// records to Observe instead, so the key is watched once. It returns at
// once, with an error wrapping [tenure.ErrInvalid], for a nil ctx or store
// or a key no store accepts.
func (c *Collector) Run(ctx context.Context, store tenure.Reader) error {
	switch {
	case ctx == nil:
		return fmt.Errorf("%w: promtenure: Collector.Run with a nil context", tenure.ErrInvalid)
	case store == nil:
		return fmt.Errorf("%w: promtenure: Collector.Run with a nil store", tenure.ErrInvalid)
	}
	if err := tenure.CheckKey(c.key); err != nil {
		return fmt.Errorf("promtenure: the collector's key: %w", err)
	}
	obs := tenure.Observer{Store: store, Key: c.key}
	for r := range obs.Changes(ctx) {
		c.Observe(r)
	}
	return ctx.Err()
}

// observeRenew records one renewal's round trip.
func (c *Collector) observeRenew(d time.Duration) {
	v := d.Seconds()
	i := sort.SearchFloat64s(renewBuckets[:], v) // the first bound ≥ v
	c.hmu.Lock()
	defer c.hmu.Unlock()
	c.renewed++
	c.sum += v
	if i < len(renewBuckets) {
		c.buckets[i]++
	}
}
