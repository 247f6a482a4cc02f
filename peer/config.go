package peer

import (
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/tcp"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// Defaults of a [Config].
const (
	DefaultHeartbeat = 100 * time.Millisecond
	// DefaultTimeoutFactor: Timeout defaults to this many heartbeats.
	DefaultTimeoutFactor = 5
)

// Config configures one member's node. Build it by hand or with
// [ParseURL]; [Config.Validate] checks it. Zero durations take defaults
// ([Config.WithDefaults]).
type Config struct {
	// ID is this member's ID; it must be in Group. [wire.ObserverID] (0, no id
	// in the URL) configures an [Observer] instead of a member.
	ID uint64
	// Group is the static member list, the same on every member.
	Group transport.Group
	// Algorithm names a registered algorithm or mode ("lowest", "bully",
	// "ring", "raft"...); see [Algorithms].
	Algorithm string
	// Heartbeat is the period of heartbeats and of the node's timers.
	// Default [DefaultHeartbeat].
	Heartbeat time.Duration
	// Timeout is how long a member may stay silent before it is suspected
	// (the coordinator: an election starts). It must be at least two
	// heartbeats; default [DefaultTimeoutFactor] heartbeats.
	Timeout time.Duration
	// Priority is this member's priority, announced to the others in
	// every message it sends: from 0 to [tenure.MaxPriority]; nil takes
	// [tenure.DefaultPriority] (new(5) sets 5). In lowest, bully and ring
	// the live member of the highest priority coordinates (among equals,
	// the algorithm's own order of IDs decides); a member of priority 0
	// ([tenure.NeverLead]) takes part in every election (it answers,
	// forwards, heartbeats) but never stands, so if only such members are
	// alive nobody coordinates and the key stays free. Modes document
	// what they do with it (raft: see its package). Give the member's
	// elector the same priority (tenure.Control.Priority, as `tenure run
	// --priority` does): an elector of priority 0 never asks, so a node
	// of a higher priority elected under it would stay coordinator with
	// its key never granted.
	Priority *int
	// NoPreempt stops a member with precedence (a recovering higher ID in
	// bully) from taking over from a healthy coordinator.
	NoPreempt bool
	// Key, if set, is the one key the node's Store answers for; if empty,
	// the first key used binds the node. It also goes, as given here
	// (possibly empty), into the derivation of the TCP transport's group
	// key with Algorithm and the member IDs, so every member and observer
	// of a group must be given the same Key.
	Key string
	// Secret authenticates every frame of the TCP transport. Required
	// unless Transport is set.
	Secret tcp.Secret
	// StateDir holds the epoch file (peer-<ID>.epoch). Required unless
	// Epochs is set.
	StateDir string
	// Transport, if set, replaces the TCP transport (memnet in tests).
	Transport transport.Transport
	// Epochs, if set, replaces the epoch file ([MemEpoch] in tests).
	Epochs EpochStore
	// Options are the algorithm's own settings, of the type its package
	// documents (raft.Options); nil takes its defaults. [ParseURL] fills
	// them from the URL parameters package peer does not know, through the
	// algorithm's [ParamParser].
	Options any
	// Logger receives structured logs. Default [slog.Default].
	Logger *slog.Logger
}

// WithDefaults returns c with zero durations and the logger defaulted.
func (c Config) WithDefaults() Config {
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeoutFactor * c.Heartbeat
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first problem in c, naming the field and value; the
// error wraps [tenure.ErrInvalid]. It checks c as given (call it on
// c.WithDefaults()).
func (c Config) Validate() error {
	observer := c.IsObserver()
	switch {
	case c.Group.Len() == 0:
		return invalidf("Config.Group is empty")
	case !observer && !c.Group.Has(c.ID):
		return invalidf("Config.ID %d is not a member of the group (%v)", c.ID, c.Group.IDs())
	case c.Algorithm == "":
		return invalidf("Config.Algorithm is empty (registered: %s)", strings.Join(Algorithms(), ", "))
	case !slices.Contains(Algorithms(), c.Algorithm):
		return invalidf("Config.Algorithm %q is not registered (registered: %s; import its package)", c.Algorithm, strings.Join(Algorithms(), ", "))
	case c.Heartbeat <= 0:
		return invalidf("Config.Heartbeat (%s) must be positive", c.Heartbeat)
	case c.Priority != nil && (*c.Priority < tenure.NeverLead || *c.Priority > tenure.MaxPriority):
		return invalidf("Config.Priority (%d) must be from %d (never lead) to %d", *c.Priority, tenure.NeverLead, tenure.MaxPriority)
	case c.Timeout < 2*c.Heartbeat:
		return invalidf("Config.Timeout (%s) must be at least two heartbeats (%s)", c.Timeout, 2*c.Heartbeat)
	case c.Transport == nil && c.Secret.IsZero():
		return invalidf("Config.Secret is missing (set secret-file)")
	case !observer && c.Transport == nil && c.Group.Addr(c.ID) == "":
		return invalidf("member %d has no address to listen on", c.ID)
	case !observer && c.Epochs == nil && c.StateDir == "":
		return invalidf("Config.StateDir is empty (set state-dir)")
	case observer && c.Transport != nil:
		return invalidf("an observer asks members over TCP; Config.Transport must be nil")
	}
	if observer {
		for _, m := range c.Group.Members() {
			if m.Addr == "" {
				return invalidf("member %d has no address for the observer to ask", m.ID)
			}
		}
	}
	return nil
}

// MemberPriority is c.Priority, or [tenure.DefaultPriority] if nil.
func (c Config) MemberPriority() int {
	if c.Priority == nil {
		return tenure.DefaultPriority
	}
	return *c.Priority
}

// IsObserver reports whether c configures an [Observer] (ID is
// [wire.ObserverID], no id in the URL) rather than a member.
func (c Config) IsObserver() bool { return c.ID == wire.ObserverID }

// URL form, registered as the scheme "peer":
//
//	peer://?id=2&peers=1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001&algorithm=bully&secret-file=/etc/tenure/peer.secret&state-dir=/var/lib/tenure
//
// Parameters: id (this member), peers (ID=host:port,...), algorithm
// (default bully), secret-file, state-dir, and optionally heartbeat and
// timeout (Go durations), no-preempt (1/true), key, priority (this
// member's, 0 to 1000, default 1; 0 never leads). The others are the
// algorithm's: its [ParamParser] turns them into Config.Options (see
// [WithParams]); an algorithm without one takes none, and ParseURL
// refuses them. The host and path must be
// empty.
//
// Without id the URL opens a read-only [Observer] of the group (for
// `tenure status` and `tenure watch`): it needs the same peers, algorithm
// and secret-file, no state-dir, and never joins the group:
//
//	peer://?peers=1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001&algorithm=bully&secret-file=/etc/tenure/peer.secret
var urlParams = []string{"id", "peers", "algorithm", "secret-file", "state-dir", "heartbeat", "timeout", "no-preempt", "key", "priority"}

// ParseURL turns a peer:// URL into a Config, loading the secret file. It
// does not validate the algorithm (see [Config.Validate]). Errors wrap
// [tenure.ErrInvalid] and never contain the secret.
func ParseURL(u *url.URL) (Config, error) {
	if u.Scheme != "peer" {
		return Config{}, invalidf("URL scheme %q is not peer", u.Scheme)
	}
	if u.Host != "" || (u.Path != "" && u.Path != "/") || u.User != nil {
		return Config{}, invalidf("a peer URL takes only query parameters (peer://?id=...&peers=...)")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, invalidf("the URL's query does not parse: %v", err)
	}
	one := func(name string) (string, error) {
		v := q[name]
		if len(v) > 1 {
			return "", invalidf("parameter %s is given %d times", name, len(v))
		}
		if len(v) == 0 {
			return "", nil
		}
		return v[0], nil
	}
	get := map[string]string{}
	for _, p := range urlParams {
		v, err := one(p)
		if err != nil {
			return Config{}, err
		}
		get[p] = v
	}
	var c Config
	if _, given := q["id"]; given {
		// An empty id is an error, not an observer: leaving it out is.
		if c.ID, err = transport.ParseID(get["id"]); err != nil {
			return Config{}, err
		}
	}
	if c.Group, err = transport.ParseMembers(get["peers"]); err != nil {
		return Config{}, err
	}
	c.Algorithm = get["algorithm"]
	if c.Algorithm == "" {
		c.Algorithm = "bully"
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"heartbeat", &c.Heartbeat}, {"timeout", &c.Timeout}} {
		if s := get[d.name]; s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v <= 0 {
				return Config{}, invalidf("parameter %s=%q is not a positive duration", d.name, s)
			}
			*d.dst = v
		}
	}
	if s := get["no-preempt"]; s != "" {
		if c.NoPreempt, err = strconv.ParseBool(s); err != nil {
			return Config{}, invalidf("parameter no-preempt=%q is not a boolean", s)
		}
	}
	if s := get["priority"]; s != "" {
		p, err := strconv.Atoi(s)
		if err != nil || p < tenure.NeverLead || p > tenure.MaxPriority {
			return Config{}, invalidf("parameter priority=%q is not an integer from %d (never lead) to %d", s, tenure.NeverLead, tenure.MaxPriority)
		}
		c.Priority = &p
	}
	c.Key = get["key"]
	c.StateDir = get["state-dir"]
	if c.Secret, err = tcp.LoadSecretParam(get["secret-file"], "secret-file"); err != nil {
		return Config{}, err
	}
	if c.Options, err = algorithmOptions(c.Algorithm, q); err != nil {
		return Config{}, err
	}
	return c, nil
}

// String describes c for logs, without the secret.
func (c Config) String() string {
	if c.IsObserver() {
		return fmt.Sprintf("peer observer of [%v] algorithm=%s heartbeat=%s timeout=%s",
			c.Group, c.Algorithm, c.Heartbeat, c.Timeout)
	}
	return fmt.Sprintf("peer %d of [%v] algorithm=%s heartbeat=%s timeout=%s no-preempt=%t priority=%d",
		c.ID, c.Group, c.Algorithm, c.Heartbeat, c.Timeout, c.NoPreempt, c.MemberPriority())
}

// tcpConfig is the TCP transport's configuration for c: heartbeats or
// keepalives cross every live link well within a few Timeouts, so a link
// silent for 4×Timeout (at least 2s) is dead.
func (c Config) tcpConfig() tcp.Config {
	return tcp.Config{Self: c.ID, Group: c.Group, Secret: c.Secret, Key: c.Key, Algorithm: c.Algorithm,
		IdleTimeout: max(4*c.Timeout, 2*time.Second), Logger: c.Logger}
}

// invalidf returns an error wrapping tenure.ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: peer: "+format, append([]any{tenure.ErrInvalid}, args...)...)
}

// checkNotDerived returns an error wrapping tenure.ErrInvalid, naming key
// and its base, if key is a derived key ([tenure.BaseKey]): Candidates of
// it would list what nobody registered for it.
func checkNotDerived(key string) error {
	if base, what, ok := tenure.BaseKey(key); ok {
		return invalidf("key %q is %s of %q, reserved by leadership control; use %q", key, what, base, base)
	}
	return nil
}

// algorithmOptions converts the parameters of q that are not peer's into
// alg's typed options, through the parser alg registered (see
// [WithParams]). A registered algorithm without one takes no others: a
// misspelt parameter ("priorty=0", "no-prempt=1") is refused rather than
// ignored, which would run the member as if it were not given. For an
// algorithm not registered, which [Config.Validate] reports, they are
// ignored.
func algorithmOptions(alg string, q url.Values) (any, error) {
	extra := url.Values{}
	for k, v := range q {
		if !slices.Contains(urlParams, k) {
			extra[k] = v
		}
	}
	a := lookup(alg)
	switch {
	case a.params != nil:
		return a.params(extra)
	case a.open == nil || len(extra) == 0:
		return nil, nil
	}
	return nil, invalidf("unknown URL parameter %q for algorithm %s (known: %s)",
		slices.Min(slices.Collect(maps.Keys(extra))), alg, strings.Join(urlParams, ", "))
}
