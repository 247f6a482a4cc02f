package httpview

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/leadership"
	"github.com/tenurehq/tenure/internal/termsafe"
)

// Options configures a [Handler]. Key and Store are required.
type Options struct {
	// Key is the key whose leadership is shown. A key kept beside another
	// key ([tenure.BaseKey]) is accepted, to show its raw record; it has
	// no candidates of its own, so /candidates then answers 400.
	Key string
	// Store is where the view reads the key: any [tenure.Store], or a
	// [tenure.Reader] such as a peer-mode observer. It is never written.
	Store tenure.Reader
	// Elector, if set, is this process's candidate for Key (or see
	// [Handler.SetElector]): the view then
	// reports is_self, answers /healthz with [tenure.Elector.Healthy] and
	// /readyz by whether it leads. Nil for a pure observer, which never
	// leads and is healthy while it can read Store.
	Elector *tenure.Elector
	// Metrics, if set, is served at /metrics (for example promhttp's
	// handler of a registry holding a promtenure collector). Without it
	// /metrics is 404: this package does not depend on a metrics library.
	Metrics http.Handler
	// History is how many leadership changes the view keeps for the
	// timeline; default 100.
	History int
	// MaxStreams bounds the /events streams open at once. A stream holds
	// its connection for as long as the client reads, so without a bound
	// streams could take every connection the server allows and starve the
	// probes and scrapes. With MaxStreams open, a new stream ends the
	// oldest one of the remote host (IP address) that holds the most, the
	// new stream counted and, on a tie, its own host's: one host's
	// streams, idle or not, never keep another's out, and a host takes a
	// stream from another only while that one holds more than it; the
	// ended stream's client, an EventSource, reconnects. Behind a proxy,
	// where every stream comes from its address, that is the oldest
	// stream. Default [DefaultMaxStreams].
	MaxStreams int
	// Clock is the time source of the observer and of the times shown;
	// default the clock of Options.Elector, else [tenure.SystemClock].
	Clock tenure.Clock
	// Logger defaults to [slog.Default]; it never receives store URLs.
	Logger *slog.Logger
}

// Change is one entry of the leadership timeline: a term with a holder
// (Name), or a vacancy (Name ""), from Since until the next entry.
type Change struct {
	Name  string    `json:"name"`
	Term  uint64    `json:"term"`
	Since time.Time `json:"since"`
}

// Leader is the JSON document served at / for Accept: application/json and
// sent as the data of every /events event. Name keeps the field of the
// leader-elector sidecar convention ({"name": ...}), so its clients work.
type Leader struct {
	// Name is the leader's identity, "" when nobody leads.
	Name string `json:"name"`
	Key  string `json:"key"`
	// Term is the current term, or the last one when nobody leads.
	Term uint64 `json:"term"`
	// IsSelf reports whether this process's elector is the leader.
	IsSelf bool `json:"is_self"`
	// Since is when the current leader's term began: the elector's own
	// record for its own term, else when this view first saw the term.
	// Null when nobody leads.
	Since *time.Time `json:"since"`
	// RenewTime is when the leader last renewed. Only the leader knows it
	// exactly, so it is set only when IsSelf; null elsewhere.
	RenewTime *time.Time `json:"renew_time"`
	// LeaseDuration is the lease's TTL in seconds; 0 when unknown.
	LeaseDuration float64 `json:"lease_duration"`
	// Transitions counts new leadership terms seen since this view
	// started, not counting the first leader it found.
	Transitions uint64 `json:"transitions"`
	// Value is the value the leader published with its grant
	// ([tenure.Config.Value]), such as an address to route to; "" when
	// nobody leads, the leader published none, or the store does not
	// publish values.
	Value string `json:"value"`
	// Identity is this process's candidate identity; "" for an observer.
	Identity string `json:"identity"`
	// Candidates are the identities seen leading in History, plus this
	// process's own, sorted.
	Candidates []string `json:"candidates"`
	// History is the recent timeline, oldest first; its last entry is the
	// current state.
	History []Change `json:"history"`
	// Now is the view's clock when the document was made, so a page can
	// show "for how long" without trusting the browser's clock.
	Now time.Time `json:"now"`
}

// state is what the view knows, guarded by Handler.mu.
type state struct {
	track   leadership.Tracker
	since   time.Time
	ttl     time.Duration
	value   string // published by the current leader
	history []Change
	sent    sentView // what the last /events broadcast said
}

// sentView is the part of a broadcast that makes it a change.
type sentView struct {
	name   string
	term   uint64
	isSelf bool
	value  string
}

// apply records one sighting of (holder, term, ttl, value) from src at
// time at, and reports whether the view changed: leadership, or the
// leader's value learnt after its term (an elector event carries no value,
// nor a TTL, which is filled in the same way but is no change to report).
// Called with h.mu held.
func (h *Handler) apply(src leadership.Source, holder string, term uint64, ttl time.Duration, value string, at time.Time) bool {
	s := &h.st
	if h.elector != nil && holder == h.identity {
		cfg := h.elector.Config()
		ttl, value = cfg.TTL, cfg.Value
	}
	switch s.track.Apply(src, holder, term) {
	case leadership.Same:
		if s.ttl == 0 && holder != "" {
			// An elector's event (no TTL) showed this term first: the
			// store's record of it fills in the lease's TTL.
			s.ttl = ttl
		}
		if value == "" || value == s.value || holder == "" {
			return false
		}
		s.value = value // a term's value never changes: this fills it in
		return true
	case leadership.NewLeader:
		s.ttl = ttl
	}
	s.value = value
	s.since = at
	s.history = append(s.history, Change{Name: holder, Term: term, Since: at})
	if over := len(s.history) - h.opts.History; over > 0 {
		s.history = slices.Delete(s.history, 0, over)
	}
	return true
}

// leaderLocked builds the JSON view. Called with h.mu held.
func (h *Handler) leaderLocked() Leader {
	s := &h.st
	l := Leader{
		Name:        s.track.Holder,
		Key:         h.opts.Key,
		Term:        s.track.Term,
		Transitions: s.track.Transitions,
		Identity:    h.identity,
		History:     slices.Clone(s.history),
		Now:         h.clock.Now(),
	}
	if l.History == nil {
		l.History = []Change{}
	}
	// The candidates of the timeline kept only: a store written from
	// outside can show a new holder every term, for as long as the view
	// runs.
	if h.identity != "" {
		l.Candidates = append(l.Candidates, h.identity)
	}
	for _, c := range s.history {
		if c.Name != "" {
			l.Candidates = append(l.Candidates, c.Name)
		}
	}
	slices.Sort(l.Candidates)
	l.Candidates = slices.Compact(l.Candidates)
	if l.Name == "" {
		return l
	}
	since := s.since
	l.Since = &since
	l.Value = s.value
	l.LeaseDuration = s.ttl.Seconds()
	if h.elector != nil {
		if st := h.elector.Status(); st.Leading && st.Term == l.Term {
			l.IsSelf = true
			since, renew := st.Since, st.LastRenew
			l.Since, l.RenewTime = &since, &renew
		}
	}
	return l
}

// Current returns the view as served at / in JSON. It never blocks on the
// store.
func (h *Handler) Current() Leader {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.leaderLocked()
}

// OnEvent returns a function to put in [tenure.Config.OnEvent] so the view
// learns of the elector's elections and step-downs at once, without
// waiting for the store's watch. It calls next (if not nil) after updating
// the view, so an existing OnEvent keeps working. The returned function
// never blocks: it updates the view under a short lock and hands events to
// /events clients without waiting for them.
func (h *Handler) OnEvent(next func(tenure.Event)) func(tenure.Event) {
	return func(ev tenure.Event) {
		if ev.Key == h.opts.Key || ev.Key == "" {
			switch ev.Kind {
			case tenure.EventElected:
				// Always published: the store's record may have shown this
				// holder already, but is_self changes only now.
				h.publish(leadership.FromElector, ev.Identity, ev.Term, 0, "", ev.Time, true)
			case tenure.EventLost, tenure.EventReleased:
				h.publish(leadership.FromElector, "", ev.Term, 0, "", ev.Time, true)
			case tenure.EventLeaderChanged:
				h.publish(leadership.FromElector, ev.Holder, ev.Term, 0, "", ev.Time, false)
			}
		}
		if next != nil {
			next(ev)
		}
	}
}

// publish applies one sighting from src and, if leadership changed, or
// with always set even if it did not (because this process's own part in
// it did), publishes the new view to /events clients.
func (h *Handler) publish(src leadership.Source, holder string, term uint64, ttl time.Duration, value string, at time.Time, always bool) {
	holder, value = bounded(holder, tenure.MaxIdentityLen), bounded(value, tenure.MaxValueLen)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.apply(src, holder, term, ttl, value, at) && !always {
		return
	}
	l := h.leaderLocked()
	sent := sentView{l.Name, l.Term, l.IsSelf, l.Value}
	if sent == h.st.sent {
		// An elector's event the store's watch showed already, is_self
		// included: not a change.
		return
	}
	data, err := json.Marshal(l)
	if err != nil {
		return // a Leader always marshals
	}
	h.st.sent = sent
	h.broadcastLocked(termsafe.JSON(data))
}

// Run follows the key in Store with a [tenure.Observer] and updates the
// view at every change of holder or term, until ctx is done; then it ends
// the open /events streams (so an [http.Server.Shutdown] need not wait for
// them) and returns ctx's error. Call it once, in its own goroutine, for
// the life of the handler: without it the view learns only from OnEvent.
// Store errors are logged by the observer and retried.
func (h *Handler) Run(ctx context.Context) error {
	if ctx == nil {
		return errNilContext("Run")
	}
	obs := tenure.Observer{Store: h.opts.Store, Key: h.opts.Key, Clock: h.clock, Logger: h.logger}
	return h.Follow(ctx, obs.Changes(ctx))
}

// errNilContext is the error of a method given a nil context.
func errNilContext(method string) error {
	return fmt.Errorf("%w: httpview: Handler.%s with a nil context", tenure.ErrInvalid, method)
}

// Follow is [Handler.Run] with the records supplied by the caller, for a
// program that already follows the key with a [tenure.Observer] and feeds
// the same records to other consumers too (a promtenure collector, its own
// output), so that the key is watched once. It passes every record from
// records to [Handler.Observe] until records is closed or ctx is done;
// then it ends the open /events streams and returns ctx's error (nil if
// records was closed while ctx was live). It blocks until then. Call it once, in its
// own goroutine, instead of Run. Run and Follow return an error wrapping
// [tenure.ErrInvalid] at once for a nil ctx.
func (h *Handler) Follow(ctx context.Context, records <-chan tenure.Record) error {
	if ctx == nil {
		return errNilContext("Follow")
	}
	defer h.endStreams()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r, ok := <-records:
			if !ok {
				return ctx.Err()
			}
			h.Observe(r)
		}
	}
}

// Observe applies one record of the key, as [tenure.Observer.Changes]
// delivers them, and publishes the view to /events clients if leadership
// changed. Records of other keys are ignored. Records must come in the
// order the observer delivers them: a record of a term older than the
// previous one is what the observer delivers once the store showed it
// alone for a TTL (a term written far above the key's counter has gone,
// a backup was restored), and the view shows it; one older than an
// elector's event only was read before it, and is ignored. It never
// blocks: it takes a short lock and hands events to clients without
// waiting. Safe for concurrent use with [Handler.OnEvent].
func (h *Handler) Observe(r tenure.Record) {
	if (r.Key != "" && r.Key != h.opts.Key) || h.ownsNewer(r) {
		return
	}
	h.publish(leadership.FromObserver, r.Holder, r.Term, r.TTL, r.Value, h.clock.Now(), false)
}

// bounded returns s as the view keeps and serves it: s itself, or, if s is
// longer than max bytes, its first max bytes at most, cut before a
// character, and its size. No tenure grant carries such a holder or value:
// it was written into the store from outside, and may be megabytes long.
func bounded(s string, max int) string {
	head, more := termsafe.Cut(s, max)
	return head + more
}

// endStreams ends the open /events streams.
func (h *Handler) endStreams() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.clients {
		delete(h.clients, c)
		close(c.ch)
	}
}

// ownsNewer reports whether this process's elector leads r's term or a
// later one while r says otherwise: r was read before the elector's
// grant landed (a store may show the new term before its holder), and the
// elector's own events are the better news.
func (h *Handler) ownsNewer(r tenure.Record) bool {
	e := h.candidate()
	if e == nil || r.Holder == h.identity {
		return false
	}
	st := e.Status()
	return st.Leading && st.Term >= r.Term
}

// DefaultMaxStreams is the default of [Options.MaxStreams].
const DefaultMaxStreams = 32

// New returns a handler for opts. It returns an error wrapping
// [tenure.ErrInvalid] if Key is invalid, Store is nil or MaxStreams is
// negative. It does not
// contact the store; call [Handler.Run] to follow it.
func New(opts Options) (*Handler, error) {
	if err := tenure.CheckKey(opts.Key); err != nil {
		return nil, err
	}
	if opts.Store == nil {
		return nil, fmt.Errorf("%w: httpview: Options.Store is nil", tenure.ErrInvalid)
	}
	if opts.History <= 0 {
		opts.History = 100
	}
	if opts.MaxStreams < 0 {
		return nil, fmt.Errorf("%w: httpview: Options.MaxStreams (%d) must not be negative", tenure.ErrInvalid, opts.MaxStreams)
	}
	if opts.MaxStreams == 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	h := &Handler{opts: opts, clock: opts.Clock, logger: opts.Logger, clients: map[*client]struct{}{}}
	if opts.Elector != nil {
		if err := h.SetElector(opts.Elector); err != nil {
			return nil, err
		}
	}
	if h.clock == nil {
		h.clock = tenure.SystemClock
	}
	if h.logger == nil {
		h.logger = slog.Default()
	}
	return h, nil
}

// SetElector makes e this process's candidate, as [Options.Elector] does,
// for programs that create the view first to put [Handler.OnEvent] in the
// elector's config. Call it once, before [Handler.Run] and before the
// handler serves. It returns an error wrapping [tenure.ErrInvalid] if e
// campaigns for another key, or if the view already has an elector.
func (h *Handler) SetElector(e *tenure.Elector) error {
	cfg := e.Config()
	if cfg.Key != h.opts.Key {
		return fmt.Errorf("%w: httpview: the elector campaigns for key %q, not %q", tenure.ErrInvalid, cfg.Key, h.opts.Key)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.elector != nil {
		return fmt.Errorf("%w: httpview: the view already has an elector", tenure.ErrInvalid)
	}
	h.elector, h.identity = e, cfg.Identity
	if h.clock == nil {
		h.clock = cfg.Clock
	}
	return nil
}

// candidate returns this process's elector, nil for an observer.
func (h *Handler) candidate() *tenure.Elector {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.elector
}

// Handler serves the leader view of one key; see the package doc for its
// routes. Create it with [New]. Safe for concurrent use.
type Handler struct {
	opts   Options
	clock  tenure.Clock
	logger *slog.Logger

	mu       sync.Mutex
	elector  *tenure.Elector // nil for an observer
	identity string          // the elector's
	st       state
	clients  map[*client]struct{}
	streams  uint64 // /events streams opened so far

	cands  sharedRead[[]tenure.Candidate] // /candidates' last read (its own lock)
	health sharedRead[struct{}]           // an observer's health checks' last read
}
