package peer

import (
	"context"
	"log/slog"
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
	// transport's (see [Transport.Send]).
	Send(to uint64, m wire.Message) error
	// Alive reports whether id is this node or was heard from within
	// Timeout and not marked dead since.
	Alive(id uint64) bool
	// MarkDead makes Alive(id) false until id is heard from again.
	MarkDead(id uint64)
	// Abstaining reports whether this node resigned within the last Timeout
	// and so must not stand for election; Abstains reports what id's last
	// message said about id.
	Abstaining() bool
	Abstains(id uint64) bool
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

// NewAlgorithm makes an algorithm instance for one node.
type NewAlgorithm func(cfg Config) (Algorithm, error)

// OpenMode opens a complete peer-election implementation that does not run
// on [Node] (raft). It must honour the Store contract described in the
// package doc; ctx bounds only the opening. When cfg.IsObserver() (no id in
// the URL) it must open a read-only observer instead of a member, typically
// [NewObserver] with the mode's own [Asker].
type OpenMode func(ctx context.Context, cfg Config) (tenure.Store, error)

var (
	algMu sync.RWMutex
	algs  = map[string]NewAlgorithm{}
	modes = map[string]OpenMode{}
)

// RegisterAlgorithm makes an algorithm run by [Node] available under name;
// algorithm packages call it from init. It panics on an empty or duplicate
// name.
func RegisterAlgorithm(name string, f NewAlgorithm) {
	register(name, func() { algs[name] = f }, f == nil)
}

// RegisterMode makes a complete implementation available under name (see
// [OpenMode]); it panics on an empty or duplicate name.
func RegisterMode(name string, f OpenMode) {
	register(name, func() { modes[name] = f }, f == nil)
}

func register(name string, add func(), isNil bool) {
	algMu.Lock()
	defer algMu.Unlock()
	if name == "" || isNil {
		panic("peer: register with an empty name or nil function")
	}
	_, a := algs[name]
	_, m := modes[name]
	if a || m {
		panic("peer: algorithm registered twice: " + name)
	}
	add()
}

// Algorithms returns the registered algorithm and mode names, sorted.
func Algorithms() []string {
	algMu.RLock()
	defer algMu.RUnlock()
	var s []string
	for k := range algs {
		s = append(s, k)
	}
	for k := range modes {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

func lookup(name string) (NewAlgorithm, OpenMode) {
	algMu.RLock()
	defer algMu.RUnlock()
	return algs[name], modes[name]
}

// Open starts this member's node for cfg (defaults applied, validated) and
// returns it as a [tenure.Store]: a [*Node] for algorithms, or whatever a
// registered mode returns. When cfg.ID is [ObserverID] it returns an
// [*Observer] instead (through the mode for modes). ctx bounds only the
// opening.
func Open(ctx context.Context, cfg Config) (tenure.Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if _, mode := lookup(cfg.Algorithm); mode != nil {
		return mode(ctx, cfg)
	}
	if cfg.IsObserver() {
		return NewObserver(cfg, nil)
	}
	return NewNode(cfg)
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
