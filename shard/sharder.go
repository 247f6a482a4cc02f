package shard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/tenurehq/tenure"
)

// Task is the work of one key's leader: it runs with a leader context
// ([tenure.LeaseFrom] gives the key's lease and its fencing term) and must
// return promptly once that context is done, which happens when the key
// moves to another member, leadership of the key is lost, or Run's context
// ends. If it returns on its own, the key's lease is released and this
// member campaigns for the key again while it owns it, as
// [tenure.Elector.Run] does.
type Task func(ctx context.Context, key string) error

// Sharder is one member of a group that spreads keys over its live
// members. Create it with [New]; its methods are safe for concurrent use,
// but only one Run may be active at a time.
type Sharder struct {
	cfg Config

	mu       sync.Mutex
	members  *membership // of the current or last Run
	running  bool
	leading  map[string]bool
	handoffs uint64
}

// New returns a member for cfg, defaults filled in. It returns an error
// wrapping [tenure.ErrInvalid], naming the field, if cfg is invalid. It
// does not contact the store.
func New(cfg Config) (*Sharder, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Sharder{cfg: cfg, members: newMembership(len(cfg.Members), cfg.Identity, cfg.Keys), leading: map[string]bool{}}, nil
}

// Config returns the member's configuration, defaults filled in.
func (s *Sharder) Config() Config { return s.cfg }

// Run makes this member live (it holds its liveness lease), follows which
// members are live, and runs task, in a goroutine of its own, for each key
// it leads, until ctx is done. Then it cancels every running task, waits
// for them to return, releases every lease it holds and returns ctx's
// error. It returns earlier with a permanent store error (one matching
// [tenure.ErrInvalid] or [tenure.ErrClosed]), after stopping everything
// the same way (also one matching [tenure.ErrTermsExhausted] for this
// member's own liveness lease), [tenure.ErrRunning] if Run is already
// active, and one wrapping [tenure.ErrInvalid] at once for a nil task or
// ctx. A key whose terms are exhausted (its record forged from outside)
// does not stop Run: it is logged and left unled, and tried again a TTL
// later, while the other keys go on.
//
// Which keys it leads is described in the package documentation: the keys
// it owns by [Assign] among the members it sees live, and, by the fallback
// rule, a key its owner left unled for too long.
func (s *Sharder) Run(ctx context.Context, task Task) error {
	switch {
	case task == nil:
		return fmt.Errorf("%w: Sharder.Run with a nil task", tenure.ErrInvalid)
	case ctx == nil:
		return fmt.Errorf("%w: Sharder.Run with a nil context (use context.Background() or context.TODO())", tenure.ErrInvalid)
	}
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return tenure.ErrRunning
	}
	s.running = true
	// Each Run starts from no view: what an earlier Run saw is stale.
	members := newMembership(len(s.cfg.Members), s.cfg.Identity, s.cfg.Keys)
	s.members = members
	s.handoffs = 0
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.running = false
		s.mu.Unlock()
	}()

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	// fail ends Run on a permanent store error. runKey parks a key whose
	// terms are exhausted instead of returning; only the liveness lease
	// passes ErrTermsExhausted up: this member can never be live.
	fail := func(err error) {
		if errors.Is(err, tenure.ErrInvalid) || errors.Is(err, tenure.ErrClosed) || errors.Is(err, tenure.ErrTermsExhausted) {
			cancel(err)
		}
	}
	sess, closeSession, err := s.cfg.session()
	if err != nil {
		return err
	}
	defer closeSession()
	// Liveness: hold our member key for as long as Run runs.
	lc := s.cfg.electorConfig(MemberLease(s.cfg.Group, s.cfg.Identity), sess)
	lc.OnEvent = members.ownLiveness(s.warnDuplicate(lc.Key, lc.OnEvent))
	ours := s.cfg.fingerprint() // see membership.follow
	if _, ok := s.cfg.Store.(tenure.Publisher); ok {
		lc.Value = ours
	}
	live, err := tenure.New(lc)
	if err != nil {
		return err
	}
	wg.Go(func() {
		fail(live.Run(ctx, func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		}))
	})
	for _, m := range s.cfg.Members {
		wg.Go(func() { members.follow(ctx, &s.cfg, m, ours) })
	}
	for _, k := range s.cfg.Keys {
		wg.Go(func() { fail(s.runKey(ctx, k, sess, task)) })
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return ctx.Err()
}

// warnDuplicate returns next (if not nil) preceded by a warning, once per
// term seen, when the liveness elector of key, while campaigning, finds
// the key held by this member's own identity: not by this Run, whose
// elector holds no grant while it campaigns, so by another process
// started with the same identity (or by an earlier grant of this one that
// has yet to end: a crashed run's, or one whose reply was lost). Without
// it such a member waits silently until the other one exits. It is safe
// for concurrent use.
func (s *Sharder) warnDuplicate(key string, next func(tenure.Event)) func(tenure.Event) {
	var mu sync.Mutex
	var warned uint64 // the last term warned about; terms start at 1
	return func(ev tenure.Event) {
		if ev.Kind == tenure.EventLeaderChanged && ev.Holder == s.cfg.Identity {
			mu.Lock()
			first := ev.Term != warned
			warned = ev.Term
			mu.Unlock()
			if first {
				s.cfg.Logger.Warn("shard: this member's liveness lease is held by its own identity under another grant: "+
					"is another member running with the same identity? This one waits until that grant ends",
					"group", s.cfg.Group, "id", s.cfg.Identity, "key", key, "term", ev.Term)
			}
		}
		if next != nil {
			next(ev)
		}
	}
}

// Status is a snapshot of one member. After Run returned, it describes the
// last moment of that Run.
type Status struct {
	Identity string
	// Live is the members this member sees live, sorted.
	Live []string
	// Owns is the keys [Assign] gives this member among Live, in the order
	// of Config.Keys.
	Owns []string
	// Leading is the keys whose task runs now, in the order of
	// Config.Keys. It differs from Owns while keys move, and by the keys
	// the fallback rule added.
	Leading []string
	// Changes counts the changes of the live set this member saw during
	// the current (or last) Run, after its first view; Handoffs counts the
	// keys it stopped leading because of one (or because a fallback term
	// ended). Summed over members and divided by Changes, Handoffs is the
	// number of keys moved per membership change.
	Changes, Handoffs uint64
}

// Status returns a snapshot of the member. It never blocks on the store.
func (s *Sharder) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.members.view()
	st := Status{Identity: s.cfg.Identity, Live: slices.Clone(v.live), Changes: s.members.changed(), Handoffs: s.handoffs}
	for _, k := range s.cfg.Keys {
		if v.has(s.cfg.Identity) && v.owner(k) == s.cfg.Identity {
			st.Owns = append(st.Owns, k)
		}
		if s.leading[k] {
			st.Leading = append(st.Leading, k)
		}
	}
	return st
}

// Leading returns the keys whose task runs now, in the order of
// Config.Keys.
func (s *Sharder) Leading() []string { return s.Status().Leading }

// handingOff counts a handoff if this member leads key while it decided
// to give it up, unless ctx (Run's) ended: that is a shutdown, not a move.
func (s *Sharder) handingOff(ctx context.Context, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ctx.Err() == nil && s.leading[key] {
		s.handoffs++
	}
}

// view returns the current view of the live set.
func (s *Sharder) view() *view {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.members.view()
}

func (s *Sharder) setLeading(key string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if on {
		s.leading[key] = true
	} else {
		delete(s.leading, key)
	}
}
