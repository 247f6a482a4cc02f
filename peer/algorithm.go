package peer

import (
	"context"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// Algorithm is an election algorithm run by a [Node]: a state machine driven
// by the node's timer ticks and messages. The node calls its methods from one
// goroutine at a time, with the node's state locked, so they must not block:
// sending is non-blocking. They act on the node only through [Env].
//
// The node does what all algorithms share: it tracks who was heard from when
// (the failure detector), the highest known epoch (persisted), the
// coordinator it follows, coordinator heartbeats, stale-claim rejection,
// and resignation (abstention) after Release.
type Algorithm interface {
	// Start is called once when the node starts (or restarts).
	Start(env Env)
	// Tick is called every heartbeat interval.
	Tick(env Env)
	// Receive is called for each message after the node's common handling.
	Receive(env Env, m wire.Message)
	// LeaderLost is called when the coordinator this node followed was
	// suspected (silent for Timeout), resigned, or when this node stopped
	// being coordinator; the algorithm typically starts an election.
	LeaderLost(env Env, id uint64)
}

// Env is a node's side of the [Algorithm] contract. Its methods must only be
// called from within the Algorithm's methods.
type Env interface {
	Self() uint64
	Group() transport.Group
	Now() time.Time
	Config() Config
	// Send sends m to member to, filling From, To and Epoch. The error is the
	// transport's (see [transport.Transport.Send]).
	Send(to uint64, m wire.Message) error
	// Alive reports whether id is this node or was heard from within
	// Timeout and not marked dead since.
	Alive(id uint64) bool
	// MarkDead makes Alive(id) false until id is heard from again.
	MarkDead(id uint64)
	// Abstaining reports whether this node must not stand for election:
	// it resigned within the last Timeout, holds back for a step-down, or
	// has priority 0 (for good); Abstains reports what id's last message
	// said about id.
	Abstaining() bool
	Abstains(id uint64) bool
	// Priority returns id's priority: this node's own (Config.Priority),
	// or what id's last message said; known is false if id was never
	// heard from since this node started. A member of priority 0 abstains
	// for good (Abstaining, Abstains).
	Priority(id uint64) (p int, known bool)
	// Leader returns the coordinator this node follows (0 if none) and its
	// epoch.
	Leader() (id, epoch uint64)
	// Elect makes this node coordinator under a fresh epoch, greater than
	// every epoch it knows and never issued by another member, persisted
	// before it returns. The algorithm then announces it.
	Elect() (epoch uint64, err error)
	// Adopt follows leader at epoch unless the claim is stale (epoch below
	// the highest known) and reports whether it did.
	Adopt(leader, epoch uint64) bool
	// StepDown ends this node's coordinatorship, if any, without resigning
	// (no abstention, no message).
	StepDown()
	// Logf logs at debug level.
	Logf(format string, args ...any)
}

// Outranks reports whether member a of priority pa takes precedence over
// member b of priority pb: a higher priority first, then, among equal
// priorities, the higher ID if highIDs (bully, ring) else the lower
// (lowest). It is a strict total order over distinct members.
func Outranks(pa int, a uint64, pb int, b uint64, highIDs bool) bool {
	switch {
	case pa != pb:
		return pa > pb
	case highIDs:
		return a > b
	}
	return a < b
}

// HeartbeatLeader sends a Heartbeat to the coordinator this node follows,
// if any: "I am alive and follow you", with this member's priority (the
// node fills it in). Bully and ring call it every Tick so that the
// coordinator hears every follower: its candidates (tenure status
// --candidates, and a leader's Control.YieldAfter) then list them with
// their priorities. The coordinator's node takes it as a sign of life
// only: it claims nothing.
func HeartbeatLeader(env Env) {
	if leader, epoch := env.Leader(); leader != 0 && leader != env.Self() {
		env.Send(leader, wire.Message{Type: wire.Heartbeat, Leader: leader, LeaderEpoch: epoch})
	}
}

// Suspicions are the members an algorithm believes dead (bully and ring
// skip them): each for Timeout after it was suspected, or until it is
// heard from (Clear), so a member that recovered is tried again even if
// it stayed silent. The zero value is not usable: make the map. It is
// used from the Algorithm's methods only, like the Algorithm.
type Suspicions map[uint64]time.Time

// Suspect marks id dead for Timeout.
func (s Suspicions) Suspect(env Env, id uint64) { s[id] = env.Now().Add(env.Config().Timeout) }

// Suspected reports whether id is marked dead.
func (s Suspicions) Suspected(env Env, id uint64) bool { return env.Now().Before(s[id]) }

// Clear forgets the suspicion of id: it was heard from.
func (s Suspicions) Clear(id uint64) { delete(s, id) }

// Opener opens one member (or, when cfg.IsObserver(), an observer) of a
// group running a registered algorithm; it is to algorithm names what
// [tenure.Opener] is to URL schemes. ctx bounds only the opening. The
// store it returns must honour the contract described in the package doc.
// Algorithms run by [Node] register [NodeOpener]; complete modes that do
// not run on Node (raft) register their own, which must open a read-only
// observer for an observer config, typically [NewObserver] with the
// mode's own [transport.Asker].
type Opener func(ctx context.Context, cfg Config) (tenure.Store, error)

// ParamParser converts the peer:// URL parameters that package peer does
// not know (params never holds id, peers, secret-file...) into an
// algorithm's typed options, which [ParseURL] puts in [Config.Options].
// An unknown parameter or a bad value gives a one-line error wrapping
// [tenure.ErrInvalid] that names it; params may be empty.
type ParamParser func(params url.Values) (options any, err error)

// RegisterOption adds to a [Register]ed algorithm.
type RegisterOption func(*algorithm)

// WithParams makes [ParseURL] convert the URL's extra parameters with
// parse. Without it, the algorithm takes no extra parameters: [ParseURL]
// refuses them, naming one.
func WithParams(parse ParamParser) RegisterOption {
	return func(a *algorithm) { a.params = parse }
}

// algorithm is a registry entry.
type algorithm struct {
	open   Opener
	params ParamParser
}

var (
	registryMu sync.RWMutex
	registry   = map[string]algorithm{}
)

// Register makes an algorithm available to [Open] (and so to peer:// URLs)
// under name. Algorithm packages call it from init, so importing one for
// its side effect is enough to use its name. It panics if name is empty or
// already registered, as [tenure.Register] does.
func Register(name string, open Opener, opts ...RegisterOption) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || open == nil {
		panic("peer: Register with an empty name or nil opener")
	}
	if _, dup := registry[name]; dup {
		panic("peer: Register called twice for algorithm " + name)
	}
	a := algorithm{open: open}
	for _, o := range opts {
		o(&a)
	}
	registry[name] = a
}

// lookup returns the registry entry of name (zero if none).
func lookup(name string) algorithm {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return registry[name]
}

// Algorithms returns the registered algorithm names, sorted.
func Algorithms() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return slices.Sorted(maps.Keys(registry))
}

// NodeOpener returns the [Opener] of an algorithm run by [Node]: it opens
// an [Observer] for an observer config, else a Node running a fresh
// algorithm from newAlg (one instance per node).
func NodeOpener(newAlg func() Algorithm) Opener {
	return func(ctx context.Context, cfg Config) (tenure.Store, error) {
		if cfg.IsObserver() {
			o, err := NewObserver(cfg, nil)
			if err != nil {
				return nil, err
			}
			return o.Store(), nil
		}
		return NewNode(cfg, newAlg())
	}
}

// Open opens this member's store for cfg (defaults applied, validated)
// through the opener registered for cfg.Algorithm: a [*Node] for the
// algorithms run by Node, or whatever a mode returns; an [*Observer] when
// cfg.ID is [wire.ObserverID]. ctx bounds only the opening. An algorithm
// nobody registered gives an error wrapping [tenure.ErrInvalid] that lists
// the registered ones.
func Open(ctx context.Context, cfg Config) (tenure.Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return lookup(cfg.Algorithm).open(ctx, cfg)
}

// loggerKey is the context key of [WithLogger].
type loggerKey struct{}

// WithLogger returns a copy of ctx carrying l, so that a member or
// observer opened from a URL with ctx ([tenure.Open] of a "peer" URL) logs
// to l instead of [slog.Default]: its node, transport and mode (raft) keep
// using l after the opening. The CLI passes its own logger this way, so
// --quiet also silences the peer packages.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// loggerFrom returns the logger [WithLogger] put in ctx, or nil.
func loggerFrom(ctx context.Context) *slog.Logger {
	l, _ := ctx.Value(loggerKey{}).(*slog.Logger)
	return l
}

func init() {
	tenure.Register("peer", func(ctx context.Context, u *url.URL) (tenure.Store, error) {
		cfg, err := ParseURL(u)
		if err != nil {
			return nil, err
		}
		cfg.Logger = loggerFrom(ctx)
		return Open(ctx, cfg)
	})
}
