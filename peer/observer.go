package peer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/tcp"
	"github.com/tenurehq/tenure/peer/transport"
)

// ErrObserver is wrapped by the error an [Observer]'s Store face
// ([Observer.Store]) returns from Acquire, Renew and Release: it wraps [tenure.ErrInvalid], because campaigning
// needs a member, which an observer is not.
var ErrObserver = fmt.Errorf("%w: peer: an observer (no id in the URL) cannot campaign; add id=N", tenure.ErrInvalid)

// Observer is a read-only view of a peer group: a [tenure.Reader] that
// reports the coordinator the members agree on
// without being a member. It never joins elections, sends no heartbeats
// and is never counted as alive by a member; it only asks members, with a
// status query authenticated by the group's secret, whom they follow.
// Open one with a peer URL without id (see [ParseURL]) or [NewObserver].
// All methods are safe for concurrent use.
type Observer struct {
	cfg Config
	ask transport.Asker

	ctx    context.Context // cancelled by Close: ends every watch
	cancel context.CancelFunc

	closeOnce sync.Once
	mu        sync.Mutex // guards key
	key       string
}

var _ tenure.Reader = (*Observer)(nil)

// NewObserver returns an observer of cfg.Group (cfg.ID must be
// [wire.ObserverID]; defaults applied, validated). It asks members through a, or,
// if a is nil, with the TCP transport's status query (algorithms lowest,
// bully, ring; modes such as raft pass their own Asker). It does not
// contact any member yet.
func NewObserver(cfg Config, a transport.Asker) (*Observer, error) {
	cfg = cfg.WithDefaults()
	if !cfg.IsObserver() {
		return nil, invalidf("Config.ID is %d: an observer has none (leave id out of the URL)", cfg.ID)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Key != "" {
		if err := tenure.CheckKey(cfg.Key); err != nil {
			return nil, err
		}
	}
	if a == nil {
		ta, err := tcp.NewAsker(cfg.tcpConfig())
		if err != nil {
			return nil, err
		}
		a = ta
	}
	o := &Observer{cfg: cfg, ask: a, key: cfg.Key}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	return o, nil
}

// queryTimeout bounds one round of status queries, whatever ctx allows, so
// a member that accepts connections but never answers cannot hold a Get.
func (o *Observer) queryTimeout() time.Duration { return o.cfg.Timeout + 2*time.Second }

// use checks key, the state and ctx, binding the observer to key on first
// use (as a member's node binds).
func (o *Observer) use(ctx context.Context, key string) error {
	if err := tenure.CheckKey(key); err != nil {
		return err
	}
	key, _, _ = SplitKey(key)
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.ctx.Err() != nil {
		return tenure.ErrClosed
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.key = cmp.Or(o.key, key); key != o.key {
		return invalidf("this peer observer follows key %q, not %q (one group per key)", o.key, key)
	}
	return nil
}

// Get asks every member, in parallel, whom it follows, and returns the
// record of the coordinator with the highest epoch reported: Holder its ID
// in decimal, Term its epoch, TTL and Remaining as the reporting member
// says (the coordinator's own report when it answered), and Value what
// the coordinator published with its grant, as the coordinator reports
// it, else as any member reports it for that coordinator and epoch (raft
// members know it; in lowest, bully and ring only the coordinator does). If no member that
// answered follows a coordinator, Holder is "" and Term the highest epoch
// reported; a coordinator whose own answer says it has priority 0 counts
// as none (in raft such a member can hold raft leadership for a moment,
// handing it away, and never grants). If no member answers, the error names each one and why; a
// process without the group's secret gets only that error. Get blocks for
// one round trip to each member, bounded by ctx and by Timeout+2s.
//
// Of the key's leadership-control keys, a candidate slot reads as the
// member of that rank by ID if it answers (see [Observer.Candidates]),
// and the control key as free: a step-down request lives on the
// coordinator's node only.
func (o *Observer) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := o.use(ctx, key); err != nil {
		return tenure.Record{}, err
	}
	switch _, kind, slot := SplitKey(key); kind {
	case KindControl:
		return tenure.Record{Key: key}, nil
	case KindSlot:
		return o.slot(ctx, key, slot)
	}
	return o.get(ctx, key)
}

type answer struct {
	id  uint64
	r   transport.Report
	err error
}

func (o *Observer) get(parent context.Context, key string) (tenure.Record, error) {
	got, err := o.ask1(parent)
	if err != nil {
		return tenure.Record{}, err
	}
	return pick(key, got), nil
}

// ask1 asks every member once, in parallel, and returns the answers, or
// an error naming each member and why when none answered. It blocks for
// one round trip to each, bounded by parent and queryTimeout.
func (o *Observer) ask1(parent context.Context) ([]answer, error) {
	ctx, cancel := context.WithTimeout(parent, o.queryTimeout())
	defer cancel()
	ids := o.cfg.Group.IDs()
	answers := make(chan answer, len(ids))
	for _, id := range ids {
		go func() {
			r, err := o.ask.Ask(ctx, id)
			answers <- answer{id, r, err}
		}()
	}
	var got, failed []answer
	for range ids {
		if a := <-answers; a.err != nil {
			failed = append(failed, a)
		} else {
			got = append(got, a)
		}
	}
	if len(got) == 0 {
		slices.SortFunc(failed, func(a, b answer) int { return compareID(a.id, b.id) })
		msgs := make([]string, len(failed))
		for i, a := range failed {
			msgs[i] = fmt.Sprintf("member %d at %s: %v", a.id, o.cfg.Group.Addr(a.id), a.err)
		}
		if err := parent.Err(); err != nil {
			return nil, fmt.Errorf("peer: status query: %w", err)
		}
		return nil, fmt.Errorf("%w: no member answered the status query (%s)", transport.ErrUnreachable, strings.Join(msgs, "; "))
	}
	return got, nil
}

// pick chooses the record among the answers (see Get). A leader whose
// own answer says it never leads (priority 0; a raft leader handing
// leadership away) is taken for none.
func pick(key string, got []answer) tenure.Record {
	rec := tenure.Record{Key: key}
	never := map[uint64]bool{}
	for _, a := range got {
		never[a.id] = a.r.NeverLeads
	}
	var best *answer
	for i := range got {
		a := &got[i]
		rec.Term = max(rec.Term, a.r.Epoch)
		if a.r.Leader == 0 || never[a.r.Leader] {
			continue
		}
		switch {
		case best == nil, a.r.LeaderEpoch > best.r.LeaderEpoch:
			best = a
		case a.r.LeaderEpoch == best.r.LeaderEpoch && best.id != best.r.Leader &&
			(a.id == a.r.Leader || a.r.Remaining < best.r.Remaining):
			best = a // the coordinator's own word, or else the most cautious
		}
	}
	if best == nil {
		return rec
	}
	rec.Holder = strconv.FormatUint(best.r.Leader, 10)
	rec.Term = best.r.LeaderEpoch
	rec.TTL, rec.Remaining = max(best.r.TTL, 0), max(best.r.Remaining, 0)
	rec.Value = best.r.Value
	if best.id != best.r.Leader {
		// Not the coordinator's own word: any value reported for that
		// coordinator and epoch (raft members all apply it; in lowest,
		// bully and ring only the coordinator knows it).
		for _, a := range got {
			if a.r.Leader == best.r.Leader && a.r.LeaderEpoch == best.r.LeaderEpoch && a.r.Value != "" {
				rec.Value = a.r.Value
				break
			}
		}
	}
	return rec
}

func compareID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Watch returns a channel that receives key's record (see [Observer.Get])
// at once, then again whenever the coordinator or its epoch changes: it
// is [tenure.Follow] polling the members every Heartbeat, so changes
// shorter than that can be missed. The channel is closed when ctx is done,
// the observer is closed, or a round finds no member answering (Get then
// says why; a [tenure.Observer] retries). The first round runs before
// Watch returns, and its error is Watch's.
func (o *Observer) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := o.use(ctx, key); err != nil {
		return nil, err
	}
	get := func(ctx context.Context) (tenure.Record, error) { return o.get(ctx, key) }
	if _, kind, _ := SplitKey(key); kind != KindMain {
		get = func(ctx context.Context) (tenure.Record, error) { return o.Get(ctx, key) } // see Get
	}
	first, err := get(ctx)
	if err != nil {
		return nil, err
	}
	return tenure.Follow{Get: get, Initial: &first, Done: o.ctx.Done(), Poll: o.cfg.Heartbeat}.Start(ctx), nil
}

// Close closes the observer's connections and ends its watches; later
// calls return [tenure.ErrClosed]. It is idempotent and does not block on
// the network.
func (o *Observer) Close() (err error) {
	o.closeOnce.Do(func() {
		o.cancel()
		if e := o.ask.Close(); !errors.Is(e, tenure.ErrClosed) {
			err = e
		}
	})
	return err
}

// Store returns o as a [tenure.Store], for where a store is expected:
// [tenure.Open] of a peer URL without id. Get, Watch and Close are o's;
// Acquire, Renew and Release fail with an error wrapping [ErrObserver]
// (after their own argument checks; [tenure.ErrClosed] once o is closed),
// since campaigning needs a member. The Observer itself is only a
// [tenure.Reader].
func (o *Observer) Store() tenure.Store { return observerStore{o} }

// observerStore is the Store face of an Observer: it refuses every write.
type observerStore struct{ *Observer }

func (s observerStore) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	if err := tenure.CheckAcquire(key, identity, ttl); err != nil {
		return tenure.Lease{}, err
	}
	return tenure.Lease{}, s.refuse()
}

func (s observerStore) Renew(context.Context, tenure.Lease) error { return s.refuse() }

// Release refuses like Acquire, except for the Grant of a step-down this
// observer requested ([Observer.RequestStepDown]): the window lives on
// the members, so there is nothing to release and it returns nil.
func (s observerStore) Release(_ context.Context, l tenure.Lease) error {
	if _, kind, _ := SplitKey(l.Key); kind == KindControl && s.ctx.Err() == nil {
		return nil
	}
	return s.refuse()
}

func (s observerStore) refuse() error {
	if s.ctx.Err() != nil {
		return tenure.ErrClosed
	}
	return ErrObserver
}
