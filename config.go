package tenure

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// DefaultTTL is the lease TTL of a [Config] that sets none.
const DefaultTTL = 15 * time.Second

// DefaultJitter is the jitter factor of a [Config] that sets none.
const DefaultJitter = 1.2

// The TTLs [Config.Validate] accepts, whatever the store. Below MinTTL the
// derived intervals (a RetryInterval of TTL/15, a RequestTimeout of TTL/5, a
// renew deadline of 2/3 TTL) are shorter than a store request or the start
// of a process, so a leader would lose its lease before its task could run
// and candidates would spin. Above MaxTTL a leader that died without
// releasing blocks failover for more than a day, and the timing arithmetic
// (backoff of RetryInterval<<16, 4×TTL safety waits, jitter) could come
// near the range of [time.Duration]. A store can narrow the range further
// with [TTLRanger].
const (
	MinTTL = 100 * time.Millisecond
	MaxTTL = 24 * time.Hour
)

// MaxJitter is the largest [Config.Jitter] accepted: jitter that can double
// an interval already makes it unpredictable, and more could overflow.
const MaxJitter = 2.0

// TTLRanger is implemented by a store whose leases accept only TTLs in a
// range narrower than [MinTTL, MaxTTL], such as Azure blob leases (15 to
// 60 s). [Config.Validate] and the CLI check the TTL against it. A zero min
// or max means the store adds no bound on that side. TTLRange must be safe
// to call at any time and must not block.
type TTLRanger interface {
	TTLRange() (min, max time.Duration)
}

// TTLBounds returns the TTLs an elector on store s accepts: [MinTTL,
// MaxTTL], narrowed by s's [TTLRanger] if it has one. s may be nil.
func TTLBounds(s Store) (lo, hi time.Duration) {
	lo, hi = MinTTL, MaxTTL
	if r, ok := s.(TTLRanger); ok {
		smin, smax := r.TTLRange()
		if smin > lo {
			lo = smin
		}
		if smax > 0 && smax < hi {
			hi = smax
		}
	}
	return lo, hi
}

// Config configures an [Elector]. Zero fields take defaults derived from TTL
// (see [Config.WithDefaults]); [Config.Validate] checks the result.
//
// Timing, for a leader whose last successful renewal started at s:
//
//	s                    s+RenewInterval         s+RenewDeadline   s+TTL
//	|--------------------|-----retries-----...---|-----margin------|
//	renew sent           next renew sent         task cancelled    store may regrant
//
// The leader context is cancelled at s+RenewDeadline at the latest, measured
// on the elector's monotonic clock from the moment the renewal was sent, so
// it is cancelled before the store, which counts TTL from when it received
// the request, can grant the key to anyone else. TTL−RenewDeadline is the
// safety margin: it absorbs clock-rate differences between the elector and
// the store and the time the task needs to notice cancellation.
type Config struct {
	// Store holds the lease. Required, unless Session is set.
	Store Store
	// Session, if set, makes the elector lead through a [Session] shared
	// with other electors: it renews nothing itself, the session's
	// keep-alives keep its grant, and a lost session ends its term. Store,
	// TTL, RenewDeadline, RenewInterval and RequestTimeout then default to
	// the session's, and must equal them when set.
	Session *Session
	// Key names the lease; candidates for the same job use the same key.
	// Required. A key that leadership control keeps beside another key
	// (one ending in [ControlSuffix], [PreferSuffix], or [CandidateSuffix]
	// and a slot number: see [BaseKey]) is reserved and refused.
	Key string
	// Identity names this candidate; unique among candidates. Required.
	Identity string
	// Value, if set, is published with each grant this candidate wins (an
	// address followers route to, or any short string): the store's records
	// of the key, observers and the term handle's [Lease] carry it while
	// this candidate leads. It needs a store that is a [Publisher]; see
	// [CheckValue] for the limits. Default "": nothing published.
	Value string

	// TTL is the lease duration. Default [DefaultTTL]. It must be from
	// [MinTTL] to [MaxTTL], and within the store's range if the store is a
	// [TTLRanger].
	TTL time.Duration
	// RenewDeadline is how long after the start of the last successful
	// renewal (or of the acquisition) the leader context is cancelled unless
	// another renewal succeeded. Default 2/3 of TTL.
	RenewDeadline time.Duration
	// RenewInterval is the time between the start of one successful renewal
	// and the next. Default TTL/3.
	RenewInterval time.Duration
	// RetryInterval is the base delay before retrying a failed renewal or a
	// failed acquisition, and the polling period of a candidate whose store
	// cannot watch. Failed acquisitions back off exponentially from it up to
	// TTL. Default TTL/15.
	RetryInterval time.Duration
	// Jitter ≥ 1 multiplies every interval above by a random factor in
	// [1, Jitter), so candidates do not move in lockstep. Default
	// [DefaultJitter].
	Jitter float64
	// RequestTimeout bounds every store request. A renewal is also bounded
	// by the time left before the renew deadline, so no request outlives the
	// leadership it is trying to extend. Default TTL/5.
	RequestTimeout time.Duration

	// StallTimeout, if positive, makes the leader task report progress with
	// [Progress] at least this often; a task that stops doing so is
	// considered stalled and leadership is given up with cause [ErrStalled].
	// Default 0: no stall detection.
	StallTimeout time.Duration
	// StopTimeout is how long the task may take to return after its context
	// was cancelled before the elector reports it as overrunning (a warning
	// log, an [EventTaskOverrun] event, and a failing health check). The
	// elector keeps waiting: it never campaigns while a task still runs.
	// Default TTL−RenewDeadline, the safety margin.
	StopTimeout time.Duration

	// Clock is the time source. Default [SystemClock].
	Clock Clock
	// Logger receives structured logs. Default [slog.Default].
	Logger *slog.Logger
	// OnEvent, if set, is called for every [Event], synchronously from the
	// elector's goroutine: it must not block. A callback that blocks holds
	// up the elector, renewals included, so leadership may be lost; the
	// leader context is still cancelled by the renew deadline (cause
	// [ErrRenewDeadline]), and a task not yet started does not start.
	OnEvent func(Event)
	// Control, if set, opts in to leadership control: this elector obeys
	// step-down requests ([RequestStepDown]) while it leads and while it
	// campaigns, registers as a candidate ([Candidates]) and campaigns
	// with [Control.Priority]. Default nil: none of that.
	Control *Control

	// Rand, if set, draws the jitter; it is used from one goroutine at a
	// time. Deterministic tests set it. Default: a randomly seeded source.
	Rand *rand.Rand
}

// WithDefaults returns c with every zero field set to its default. A store
// implementing [Defaulter] supplies Identity and TTL first.
func (c Config) WithDefaults() Config {
	if s := c.Session; s != nil {
		sc := s.cfg
		c.Store = cmp.Or(c.Store, sc.Store)
		c.TTL, c.RenewDeadline = cmp.Or(c.TTL, sc.TTL), cmp.Or(c.RenewDeadline, sc.RenewDeadline)
		c.RenewInterval, c.RequestTimeout = cmp.Or(c.RenewInterval, sc.RenewInterval), cmp.Or(c.RequestTimeout, sc.RequestTimeout)
		c.Clock = cmp.Or[Clock](c.Clock, sc.Clock)
	}
	if d, ok := c.Store.(Defaulter); ok {
		id, ttl := d.Defaults()
		if c.Identity == "" {
			c.Identity = id
		}
		if c.TTL == 0 {
			c.TTL = ttl
		}
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = twoThirds(c.TTL)
	}
	if c.RenewInterval == 0 {
		c.RenewInterval = c.TTL / 3
	}
	if c.RetryInterval == 0 {
		c.RetryInterval = c.TTL / 15
	}
	if c.Jitter == 0 {
		c.Jitter = DefaultJitter
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = c.TTL / 5
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = c.TTL - c.RenewDeadline
	}
	if c.Clock == nil {
		c.Clock = SystemClock
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	return c
}

// DefaultKillGrace is the longest grace [Config.KillGrace] gives by default.
const DefaultKillGrace = 2 * time.Second

// Margin returns TTL − RenewDeadline: the time between the latest moment a
// leader context is cancelled and the earliest moment the store may grant
// the key to another candidate, in which the task must stop.
func (c Config) Margin() time.Duration { return c.TTL - c.RenewDeadline }

// KillGrace is for a supervisor that stops a task from outside, as `tenure
// run` stops its command: a polite stop (SIGTERM) when the leader context is
// cancelled, a forced one (SIGKILL) grace later, which must still come
// before the store can regrant. It returns grace if 0 < grace <
// [Config.Margin]; for a zero grace, half the margin but at most
// [DefaultKillGrace]. Any other grace is an error wrapping [ErrInvalid].
// Call it on a config with defaults filled in ([Config.WithDefaults]).
func (c Config) KillGrace(grace time.Duration) (time.Duration, error) {
	margin := c.Margin()
	switch {
	case grace == 0:
		return min(DefaultKillGrace, margin/2), nil
	case grace < 0:
		return 0, invalidf("kill grace %s must not be negative", grace)
	case grace >= margin:
		return 0, invalidf("kill grace %s must be shorter than the margin TTL − RenewDeadline (%s)", grace, margin)
	}
	return grace, nil
}

// twoThirds returns ⌊2d/3⌋ without overflowing for any d.
func twoThirds(d time.Duration) time.Duration { return d/3*2 + d%3*2/3 }

// Validate reports the first inconsistency in c, naming the field and its
// value. It checks c as given; call it on c.WithDefaults() to check what an
// elector would use. The rules: Store, Key and Identity set and valid;
// Key not a key that leadership control keeps beside another ([BaseKey]);
// Value valid (see [CheckValue]) and, if set, the store a [Publisher];
// TTL within [TTLBounds] of the store ([MinTTL] to [MaxTTL] unless the store
// is a [TTLRanger]); TTL > RenewDeadline > RenewInterval × Jitter > 0;
// 1 ≤ Jitter ≤ [MaxJitter]; 0 < RetryInterval ≤ TTL;
// 0 < RequestTimeout ≤ RenewDeadline; StallTimeout ≥ 0; StopTimeout ≥ 0.
// With these, no timing arithmetic of the elector can overflow.
func (c Config) Validate() error { return c.validate(false) }

// validate is Validate; with derived, Key may be a derived key.
func (c Config) validate(derived bool) error {
	if c.Store == nil {
		return invalidf("Config.Store is nil")
	}
	// The same rules as CheckAcquire, with messages that name the field.
	if err := CheckKey(c.Key); err != nil {
		return fmt.Errorf("Config.Key: %w", err)
	}
	if !derived {
		if err := checkNotDerived("Config.Key", c.Key); err != nil {
			return err
		}
	}
	if err := checkName("identity", c.Identity, MaxIdentityLen); err != nil {
		return fmt.Errorf("Config.Identity: %w", err)
	}
	if err := CheckValue(c.Value); err != nil {
		return fmt.Errorf("Config.Value: %w", err)
	}
	if err := c.validateSession(); err != nil {
		return err
	}
	if _, ok := c.Store.(Publisher); c.Value != "" && !ok && c.Session == nil {
		return invalidf("Config.Value is set but the store (%T) cannot publish values", c.Store)
	}
	if c.TTL <= 0 {
		return invalidf("Config.TTL (%s) must be positive", c.TTL)
	}
	if lo, hi := TTLBounds(c.Store); c.TTL < lo || c.TTL > hi {
		return invalidf("Config.TTL (%s) must be from %s to %s%s", c.TTL, lo, hi, forStore(c.Store))
	}
	switch {
	case c.RenewDeadline <= 0:
		return invalidf("Config.RenewDeadline (%s) must be positive", c.RenewDeadline)
	case c.RenewDeadline >= c.TTL:
		return invalidf("Config.RenewDeadline (%s) must be shorter than Config.TTL (%s)", c.RenewDeadline, c.TTL)
	case !(c.Jitter >= 1 && c.Jitter <= MaxJitter): // also NaN
		return invalidf("Config.Jitter (%g) must be from 1 to %g", c.Jitter, MaxJitter)
	case c.RenewInterval <= 0:
		return invalidf("Config.RenewInterval (%s) must be positive", c.RenewInterval)
	case c.longestRenewInterval() >= c.RenewDeadline:
		return invalidf("Config.RenewInterval (%s) × Config.Jitter (%g) must be shorter than Config.RenewDeadline (%s)",
			c.RenewInterval, c.Jitter, c.RenewDeadline)
	case c.RetryInterval <= 0:
		return invalidf("Config.RetryInterval (%s) must be positive", c.RetryInterval)
	case c.RetryInterval > c.TTL:
		return invalidf("Config.RetryInterval (%s) must not exceed Config.TTL (%s)", c.RetryInterval, c.TTL)
	case c.RequestTimeout <= 0:
		return invalidf("Config.RequestTimeout (%s) must be positive", c.RequestTimeout)
	case c.RequestTimeout > c.RenewDeadline:
		return invalidf("Config.RequestTimeout (%s) must not exceed Config.RenewDeadline (%s)", c.RequestTimeout, c.RenewDeadline)
	case c.StallTimeout < 0:
		return invalidf("Config.StallTimeout (%s) must not be negative", c.StallTimeout)
	case c.StopTimeout < 0:
		return invalidf("Config.StopTimeout (%s) must not be negative", c.StopTimeout)
	}
	return c.validateControl()
}

// blameDefaults adds to err, what validate said of c (given with its
// defaults filled in), which intervals given left to their defaults, if
// setting them is what c lacks: a RenewDeadline set short on its own
// leaves the defaults of RenewInterval and RequestTimeout, taken from the
// TTL, too long, and err names fields the caller never set.
func (given Config) blameDefaults(c Config, derived bool, err error) error {
	if given.Session != nil || c.RenewDeadline <= 0 {
		return err
	}
	var blamed []string
	if given.RenewInterval == 0 && c.longestRenewInterval() >= c.RenewDeadline {
		c.RenewInterval = c.RenewDeadline / 4
		blamed = append(blamed, fmt.Sprintf("Config.RenewInterval was left to its default, TTL/3 (%s would do)", c.RenewInterval))
	}
	if given.RequestTimeout == 0 && c.RequestTimeout > c.RenewDeadline {
		c.RequestTimeout = c.RenewDeadline / 3
		blamed = append(blamed, fmt.Sprintf("Config.RequestTimeout was left to its default, TTL/5 (%s would do)", c.RequestTimeout))
	}
	if len(blamed) == 0 || c.validate(derived) != nil {
		return err
	}
	return fmt.Errorf("%w: %s", err, strings.Join(blamed, "; "))
}

// validateSession checks that the fields a Session sets agree with it.
func (c Config) validateSession() error {
	s := c.Session
	if s == nil {
		return nil
	}
	sc := s.cfg
	switch {
	case c.Store != sc.Store:
		return invalidf("Config.Store is not the store of Config.Session")
	case c.TTL != sc.TTL:
		return invalidf("Config.TTL (%s) differs from the TTL of Config.Session (%s)", c.TTL, sc.TTL)
	case c.RenewDeadline != sc.RenewDeadline:
		return invalidf("Config.RenewDeadline (%s) differs from that of Config.Session (%s)", c.RenewDeadline, sc.RenewDeadline)
	case c.Clock != sc.Clock:
		return invalidf("Config.Clock is not the clock of Config.Session")
	}
	return nil
}

// addSat returns a+b for non-negative a and b, saturating instead of
// overflowing: a Remaining read from a store can be anything.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// forStore qualifies a TTL range that came from the store.
func forStore(s Store) string {
	if _, ok := s.(TTLRanger); ok {
		return " for this store"
	}
	return ""
}

// longestRenewInterval is the longest a jittered RenewInterval can be.
func (c *Config) longestRenewInterval() time.Duration {
	return time.Duration(float64(c.RenewInterval) * c.Jitter)
}

// jittered returns d multiplied by a random factor in [1, c.Jitter).
func (c *Config) jittered(d time.Duration) time.Duration {
	if c.Jitter <= 1 {
		return d
	}
	return time.Duration(float64(d) * (1 + (c.Jitter-1)*c.Rand.Float64()))
}
