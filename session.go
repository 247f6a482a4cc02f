package tenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// SessionConfig configures a [Session]. Zero fields get the same defaults
// as the matching fields of [Config], and follow the same rules.
type SessionConfig struct {
	// Store keeps the session and its grants. It must implement
	// [SessionStore]. Required.
	Store Store
	// TTL is how long the session, and every grant in it, outlives the
	// store's receipt of the last successful keep-alive.
	TTL time.Duration
	// RenewDeadline: every elector leading through the session is
	// cancelled at the latest this long after the last successful
	// keep-alive was sent. Default 2/3 TTL.
	RenewDeadline time.Duration
	// RenewInterval is the period of keep-alives. Default TTL/3.
	RenewInterval time.Duration
	// RetryInterval is the delay before retrying a failed keep-alive.
	// Default TTL/15.
	RetryInterval time.Duration
	// RequestTimeout bounds every store request, and a keep-alive also by
	// the time left before RenewDeadline. Default TTL/5.
	RequestTimeout time.Duration
	// Clock is the time source. Default [SystemClock].
	Clock Clock
	// Logger receives structured logs. Default [slog.Default].
	Logger *slog.Logger
	// MaxAcquires bounds the store Acquires the session has under way at
	// once; more wait their turn. A burst of thousands (a process starting
	// to lead thousands of keys) would otherwise queue in the store ahead
	// of the session's keep-alives, which then miss the renew deadline and
	// end every grant. Default [DefaultMaxAcquires]. A store session that
	// acquires in batches ([BatchAcquirer]) has one batch under way at a
	// time instead, of up to 256 Acquires, and no other bound.
	MaxAcquires int
	// Rand, if set, seeds the jitter of each [Session.Campaign], drawn
	// under the session's lock. Deterministic tests set it. Default: a
	// randomly seeded source per Campaign.
	Rand *rand.Rand
	// OnKeepAlive, if set, is called once each keep-alive of the store
	// session has returned, and when the session's renew deadline passes
	// with none back, from the session's keep-alive goroutine: it must
	// not block. A callback that blocks holds up the keep-alives, so the
	// session may end; its terms still end by the renew deadline (cause
	// [ErrRenewDeadline]). It is what a process leading many keys through
	// the session can measure its leadership's health by (promtenure's
	// SessionCollector), since its electors renew nothing of their own.
	OnKeepAlive func(SessionKeepAlive)
	// OnEvent, if set, receives the events of the keys led through
	// [Session.Campaign], as [Config.OnEvent] does an elector's: its
	// campaign's (acquire attempts, leader changes), then EventElected
	// when Campaign returns a [Leadership], and one EventLost (the store
	// ended the grant or the renew deadline passed; Err says which) or
	// EventReleased (Resign, or the session's Close, first) when that
	// leadership's context ends. The same events are logged as an
	// elector's are. Electors given the session report to their own
	// Config.OnEvent instead. It is called from the campaigning
	// goroutine, from Resign's, or from a goroutine of its own when the
	// session ended the leadership, and must not block.
	OnEvent func(Event)
}

// SessionKeepAlive is one keep-alive of a [Session]'s store session, as
// [SessionConfig.OnKeepAlive] receives it.
type SessionKeepAlive struct {
	// Sent is when the keep-alive was sent, on the session's clock; Took
	// is how long it took to return. When the renew deadline passed with
	// no keep-alive back, Sent is the last successful one's and Took 0.
	Sent time.Time
	Took time.Duration
	// Err is nil if it extended every grant in the session. Otherwise it
	// matches [ErrLost] or [ErrRenewDeadline] if the store session ended
	// with it (every grant in it ended), or is a transient failure that
	// the session retries after [SessionConfig.RetryInterval].
	Err error
	// Grants is how many grants the store session holds after it; Gone
	// how many it reported taken away from outside (each ended).
	Grants, Gone int
}

// DefaultMaxAcquires is the default of [SessionConfig.MaxAcquires].
const DefaultMaxAcquires = 64

// Session shares one liveness session of a [SessionStore] among every
// [Elector] given it in [Config.Session] and every [Leadership] its
// Campaign returns, so that a process leading many keys sends one
// keep-alive per [SessionConfig.RenewInterval] whatever the number of
// keys, where electors on their own renew each key. An Elector's Run costs
// two goroutines per key; a Leadership none. Grants made
// through it keep their own key, term and release: fencing stays per key.
//
// The guarantee is the elector's, per session: every elector leading
// through the session has its leader context cancelled no later than
// RenewDeadline after the last successful keep-alive was sent, before the
// store can end the session and grant its keys to others. A session that
// ends (a keep-alive too late, the store's word that it expired) ends
// every term in it at once; the electors campaign again in a new session,
// which the Session opens when first needed. A grant deleted or superseded
// from outside ends its own term at the next keep-alive at the latest.
//
// A Session opens its store session lazily and is safe for concurrent use.
// Close it once the electors using it have returned.
type Session struct {
	cfg      SessionConfig
	store    SessionStore
	open     chan struct{} // a one-slot lock held while a store session opens
	acquires chan struct{} // a slot per Acquire under way (MaxAcquires)

	// Best-effort background calls (releases retried, grants given back)
	// run under bgCtx, which Close cancels, and in bg, which it waits for.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	bg       sync.WaitGroup

	mu     sync.Mutex
	cur    *generation // the live store session, nil when none
	closed bool
}

// NewSession returns a session for cfg with defaults filled in. It returns
// an error wrapping [ErrInvalid] naming the offending field, and one
// wrapping [errors.ErrUnsupported] if the store cannot share sessions.
// NewSession does not contact the store.
func NewSession(cfg SessionConfig) (*Session, error) {
	if cfg.Store == nil {
		return nil, invalidf("SessionConfig.Store is nil")
	}
	ss, ok := cfg.Store.(SessionStore)
	if !ok {
		return nil, fmt.Errorf("tenure: the store (%T) cannot share a session among grants: %w", cfg.Store, errors.ErrUnsupported)
	}
	c := Config{Store: cfg.Store, Key: "session", Identity: "session", TTL: cfg.TTL,
		RenewDeadline: cfg.RenewDeadline, RenewInterval: cfg.RenewInterval, RetryInterval: cfg.RetryInterval,
		RequestTimeout: cfg.RequestTimeout, Clock: cfg.Clock, Logger: cfg.Logger, Jitter: 1}
	given := c
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		err = given.blameDefaults(c, false, err)
		msg := strings.TrimPrefix(err.Error(), ErrInvalid.Error()+": ")
		return nil, invalidf("%s", strings.ReplaceAll(msg, "Config.", "SessionConfig."))
	}
	if cfg.MaxAcquires < 0 {
		return nil, invalidf("SessionConfig.MaxAcquires (%d) must not be negative", cfg.MaxAcquires)
	}
	if cfg.MaxAcquires == 0 {
		cfg.MaxAcquires = DefaultMaxAcquires
	}
	cfg.TTL, cfg.RenewDeadline, cfg.RenewInterval = c.TTL, c.RenewDeadline, c.RenewInterval
	cfg.RetryInterval, cfg.RequestTimeout, cfg.Clock, cfg.Logger = c.RetryInterval, c.RequestTimeout, c.Clock, c.Logger
	bgCtx, bgCancel := context.WithCancel(context.Background())
	return &Session{cfg: cfg, store: ss, open: make(chan struct{}, 1), acquires: make(chan struct{}, cfg.MaxAcquires),
		bgCtx: bgCtx, bgCancel: bgCancel}, nil
}

// errSessionClosed is the cause of the terms a Session's Close ends, and
// the error of campaigns after it; it matches [ErrClosed].
var errSessionClosed error = sessionClosed{}

type sessionClosed struct{}

func (sessionClosed) Error() string { return "tenure: session closed" }
func (sessionClosed) Unwrap() error { return ErrClosed }

// Config returns the session's configuration, defaults filled in.
func (s *Session) Config() SessionConfig { return s.cfg }

// Close ends the session: every elector leading through it, and every
// Leadership's context, is cancelled with a cause matching [ErrClosed],
// and nothing campaigns in it any more (Run, Do and Campaign return
// ErrClosed). The store session, and with it every grant still in it,
// ends once the electors' tasks have returned and every Leadership was
// resigned; Close waits for that until ctx is done. Calling Close again
// does nothing.
func (s *Session) Close(ctx context.Context) error {
	if err := checkContext(ctx, "Session.Close"); err != nil {
		return err
	}
	s.mu.Lock()
	s.closed = true
	g := s.cur
	s.mu.Unlock()
	s.bgCancel()
	s.bg.Wait()
	if g == nil {
		return nil
	}
	g.end(errSessionClosed)
	select {
	case <-g.closed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// campaignRand returns the jitter source of one Campaign: nil (New
// seeds one) unless SessionConfig.Rand is set.
func (s *Session) campaignRand() *rand.Rand {
	if s.cfg.Rand == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return rand.New(rand.NewPCG(s.cfg.Rand.Uint64(), s.cfg.Rand.Uint64()))
}

// requestContext bounds one store request of the session by
// RequestTimeout from now, on the session's clock.
func (s *Session) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return withDeadline(ctx, s.cfg.Clock, s.cfg.Clock.Now().Add(s.cfg.RequestTimeout), errRequestTimeout)
}

// acquireSlot waits, bounded by ctx, until fewer than MaxAcquires
// Acquires are under way, and returns the func that frees the slot. It
// returns ctx's error if ctx ends first.
func (s *Session) acquireSlot(ctx context.Context) (func(), error) {
	select {
	case s.acquires <- struct{}{}:
		return func() { <-s.acquires }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// background runs f in the background under the session's background
// context, unless the session is closed; it reports whether f runs.
func (s *Session) background(f func(ctx context.Context)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f(s.bgCtx)
	}()
	return true
}

// current returns the live store session, opening one if there is none.
func (s *Session) current(ctx context.Context) (*generation, error) {
	select {
	case s.open <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.open }()
	s.mu.Lock()
	g, closed := s.cur, s.closed
	s.mu.Unlock()
	switch {
	case closed:
		return nil, errSessionClosed
	case g != nil:
		return g, nil
	}
	g, err := s.openGeneration(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		g.end(errSessionClosed)
		return nil, errSessionClosed
	}
	s.cur = g
	return g, nil
}

// openGeneration opens a store session and starts keeping it alive.
func (s *Session) openGeneration(ctx context.Context) (*generation, error) {
	c := &s.cfg
	sent := c.Clock.Now()
	rctx, cancel := withDeadline(ctx, c.Clock, sent.Add(c.RequestTimeout), errRequestTimeout)
	ss, err := s.store.OpenSession(rctx, c.TTL)
	cancel()
	if err != nil {
		return nil, err
	}
	g := &generation{s: s, ss: ss, done: make(chan struct{}), closed: make(chan struct{}),
		sent: sent, deadline: sent.Add(c.RenewDeadline), grants: map[*sessionGrant]struct{}{}}
	g.settle(c.Clock.Now(), g.deadline)
	if !c.Clock.Now().Before(g.deadline) {
		g.end(fmt.Errorf("%w (opening the session took longer than the renew deadline)", ErrRenewDeadline))
		return nil, g.cause
	}
	kctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	g.stop = stop
	go g.keep(kctx)
	return g, nil
}
