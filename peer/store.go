package peer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/tenurehq/tenure"
)

// ErrElecting is returned by [Node.Acquire] while no coordinator is known
// (an election is running). It is transient, not [tenure.ErrHeld]: the
// elector retries with backoff, and wakes earlier through Watch.
var ErrElecting = fmt.Errorf("peer: election in progress, no coordinator known yet (%w)", tenure.ErrUnavailable)

// ErrHandover is returned by [Node.Acquire] while this node is coordinator
// but does not grant yet: a member that may still hold a grant under an
// older epoch has neither yielded nor stayed silent long enough (see the
// package doc). It is transient ([tenure.ErrUnavailable]); the node's
// Watch delivers the record again when the wait ends, so a watching
// elector retries at once.
var ErrHandover = fmt.Errorf("peer: elected, waiting for the previous coordinator to step down (%w)", tenure.ErrUnavailable)

var (
	_ tenure.Store     = (*Node)(nil)
	_ tenure.Publisher = (*Node)(nil)
)

// enter checks ctx and that the node is open, then key against the
// node's key, binding the node to it on first use. The caller holds mu.
func (n *Node) enter(ctx context.Context, key string) error {
	if err := n.usable(ctx); err != nil {
		return err
	}
	if n.key == "" {
		n.key = key
		return nil
	}
	if key != n.key {
		return invalidf("this peer node elects for key %q, not %q (one node per key)", n.key, key)
	}
	return nil
}

func (n *Node) usable(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n.closed {
		return tenure.ErrClosed
	}
	return nil
}

// recordLocked is the key's record as this node sees it.
func (n *Node) recordLocked(now time.Time) tenure.Record {
	r := tenure.Record{Key: n.key, Term: n.maxEpoch}
	if n.leader == 0 {
		return r
	}
	r.Holder, r.Term, r.TTL = strconv.FormatUint(n.leader, 10), n.leaderEpoch, n.cfg.Timeout
	r.Remaining = n.cfg.Timeout
	if !n.isCoordinator() {
		r.Remaining = max(n.leaderHeard.Add(n.cfg.Timeout).Sub(now), 0)
	} else if n.granted == n.leaderEpoch && n.held.epoch == n.granted {
		r.Value = n.held.value // only the coordinator knows it
	}
	return r
}

// Acquire implements [tenure.Store]. identity must be this node's ID in
// decimal (else an error wrapping [tenure.ErrInvalid] naming both). It
// succeeds iff the algorithm has made this node coordinator, its handover
// is complete (every other member yielded or stayed silent; until then an
// error matching [ErrHandover]) and no lease for this epoch is
// outstanding; the lease's Term is the coordinator epoch. If another member
// is coordinator it returns a *[tenure.HeldError] naming it; while none is
// known, an error matching [ErrElecting], or [tenure.ErrTermsExhausted]
// once this node can issue no higher epoch (it knows 2^64-1, or the
// highest of its residue). ttl is how long the node assumes
// the lease may be used after its last successful renewal once it stops
// being current (see the package doc); leadership ends by the algorithm,
// not by time.
//
// A call after this node's earlier lease stopped being current tells the
// node that lease's holder came back to campaign, so it no longer uses it:
// the node then yields to the coordinator it follows. Acquire never blocks
// on the network.
func (n *Node) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return n.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Node.Acquire], publishing
// c.Value with the grant. Only the coordinator knows the value: its own
// [Node.Get] and its answers to observers' status queries carry it while
// the grant is outstanding (so [Observer.Get] reports it when the
// coordinator answered); the other members' records (their Get, Watch
// and HeldError) have none. That is weaker than what [tenure.Claim]
// promises of a store, where every record of the key carries the value:
// route through an observer, not through another member. A bad value is
// an error wrapping [tenure.ErrInvalid] (see [tenure.CheckValue]).
func (n *Node) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	identity, ttl := c.Identity, c.TTL
	if err := tenure.CheckAcquire(key, identity, ttl); err != nil {
		return tenure.Lease{}, err
	}
	if err := tenure.CheckValue(c.Value); err != nil {
		return tenure.Lease{}, err
	}
	if identity != n.Identity() {
		return tenure.Lease{}, invalidf("identity %q is not this node's ID %q: a peer node campaigns only for itself", identity, n.Identity())
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if base, kind, _ := SplitKey(key); kind != KindMain {
		// Leadership control: the node serves its candidate slots
		// itself (registering is a no-op) and takes step-down requests
		// through RequestStepDown, never as a grant.
		if err := n.enter(ctx, base); err != nil {
			return tenure.Lease{}, err
		}
		if kind == KindControl {
			return tenure.Lease{}, invalidf("the control key %q is the node's own; ask for a step-down with tenure.RequestStepDown", key)
		}
		return tenure.Lease{Key: key, Identity: identity, Term: 1, TTL: ttl, Token: "1", Value: c.Value}, nil
	}
	if err := n.enter(ctx, key); err != nil {
		return tenure.Lease{}, err
	}
	now := time.Now()
	if n.held.epoch != 0 && !(n.isCoordinator() && n.granted == n.held.epoch) {
		// The elector campaigns again: its term (and task) ended.
		n.ended("its holder campaigns again")
	}
	switch {
	case n.leader == 0:
		if _, ok := n.nextEpoch(); !ok {
			return tenure.Lease{}, fmt.Errorf("%w: member %d knows epoch %d and can issue no higher one (reset the members' epoch files once no term is in use)",
				tenure.ErrTermsExhausted, n.self, n.maxEpoch)
		}
		return tenure.Lease{}, fmt.Errorf("%w (member %d, last epoch %d)", ErrElecting, n.self, n.maxEpoch)
	case n.isCoordinator() && n.granted != n.leaderEpoch && now.Before(n.holdUntil):
		// Elected while a step-down's hold-back naming another member
		// was on its way (a ring election can conclude before the old
		// coordinator's Resign arrives): resign rather than grant, so
		// that only the named member takes the key during the window.
		n.resign(now)
		return tenure.Lease{}, fmt.Errorf("%w (member %d holds back for a step-down)", ErrElecting, n.self)
	case !n.isCoordinator() || n.granted == n.leaderEpoch:
		return tenure.Lease{}, &tenure.HeldError{Record: n.recordLocked(now)}
	case !n.granting():
		return tenure.Lease{}, fmt.Errorf("%w (member %d, epoch %d, elected %s ago)", ErrHandover, n.self,
			n.leaderEpoch, now.Sub(n.ho.since).Round(time.Millisecond))
	}
	n.granted = n.leaderEpoch
	n.held = grant{epoch: n.leaderEpoch, ttl: ttl, renewed: now, value: c.Value}
	return tenure.Lease{Key: key, Identity: identity, Term: n.leaderEpoch, TTL: ttl,
		Token: strconv.FormatUint(n.leaderEpoch, 10), Value: c.Value}, nil
}

// current checks that l is the outstanding lease of this node's current
// coordinator epoch.
func (n *Node) current(l tenure.Lease) error {
	if l.Key != n.key || l.Identity != n.Identity() || !n.isCoordinator() || n.leaderEpoch != l.Term || n.granted != l.Term {
		return fmt.Errorf("%w: member %d is no longer coordinator under epoch %d (now following %d at epoch %d, highest known %d)",
			tenure.ErrLost, n.self, l.Term, n.leader, n.leaderEpoch, n.maxEpoch)
	}
	return nil
}

// Renew implements [tenure.Store]: it succeeds while this node is still
// coordinator under l's epoch, and returns an error matching
// [tenure.ErrLost] once it learned of a higher epoch or a coordinator with
// precedence. After Close it returns an error matching both
// [tenure.ErrClosed] and [tenure.ErrLost]. It never blocks on the network.
func (n *Node) Renew(ctx context.Context, l tenure.Lease) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		// The node left the group: whatever it led is over for good, so
		// the error matches ErrLost too and the elector stops the task at
		// once rather than retrying until its renew deadline.
		return fmt.Errorf("%w: %w: member %d left the group", tenure.ErrClosed, tenure.ErrLost, n.self)
	}
	if err := n.usable(ctx); err != nil {
		return err
	}
	if _, kind, _ := SplitKey(l.Key); kind != KindMain {
		return nil // a candidate slot: registered while the node is open
	}
	if err := n.current(l); err != nil {
		return err
	}
	n.held.renewed = time.Now()
	return nil
}

// Release implements [tenure.Store]: the coordinator resigns. It sends
// Resign to every member, stops being coordinator and abstains from
// elections for Timeout (after a step-down request, for its window, and
// the members but the one handed over to abstain too: see stepdown.go),
// so the others elect someone else at once; after
// that it stands again (in bully without no-preempt and in lowest it then
// takes over again, being the preferred member; in ring it stays a
// follower). It returns [tenure.ErrLost] if l is not current; the node
// then knows that l is no longer used and yields to the coordinator it
// follows.
func (n *Node) Release(ctx context.Context, l tenure.Lease) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := n.usable(ctx); err != nil {
		return err
	}
	if _, kind, _ := SplitKey(l.Key); kind != KindMain {
		return nil // a candidate slot, or a step-down's grant: nothing to give back
	}
	if err := n.current(l); err != nil {
		if l.Key == n.key && l.Identity == n.Identity() && l.Term == n.held.epoch {
			n.ended("released")
		}
		return err
	}
	n.held = grant{}
	n.resign(time.Now())
	return nil
}

// Get implements [tenure.Store]: the coordinator this node follows (Holder
// is its ID in decimal, Term its epoch), or Holder "" and Term = the highest
// known epoch while none is known. Remaining estimates how long until the
// coordinator would be suspected.
//
// Leadership control: the key's control key ([tenure.ControlKey]) reads as
// the step-down request this node took as coordinator while its window
// lasts, and its candidate slots as the members this node sees live (see
// [Node.Candidates]).
func (n *Node) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return tenure.Record{}, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	base, kind, slot := SplitKey(key)
	if err := n.enter(ctx, base); err != nil {
		return tenure.Record{}, err
	}
	if kind != KindMain {
		return n.derivedGet(key, base, kind, slot), nil
	}
	return n.recordLocked(time.Now()), nil
}

// Watch implements [tenure.Reader] with [tenure.Follow], woken by every
// change of the node's view: the current record at once, then one whenever
// the coordinator or its epoch changes, including to "none" when it is
// suspected or when this node stops being coordinator (so a leading
// elector's watch cancels its task at once). On the coordinator's own
// node the record names it only once its handover is complete (until then
// Holder is "" at its epoch), so a waiting elector acquires as soon as it
// can. It ends when ctx is done or the node is closed; a watch whose last
// record named this node coordinator first delivers the same epoch with
// no holder when the node closes (it left the group, so its lease is
// over), and gives up a heartbeat later if nobody reads. Watch does not
// block.
func (n *Node) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return nil, err
	}
	wake := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	base, kind, slot := SplitKey(key)
	if err := n.enter(ctx, base); err != nil {
		cancel()
		return nil, err
	}
	get := n.watched
	if kind != KindMain {
		get = func(context.Context) (tenure.Record, error) {
			n.mu.Lock()
			defer n.mu.Unlock()
			if n.closed {
				return tenure.Record{}, tenure.ErrClosed
			}
			return n.derivedGet(key, base, kind, slot), nil
		}
	}
	n.watchers[wake] = cancel
	context.AfterFunc(ctx, func() {
		n.mu.Lock()
		delete(n.watchers, wake)
		n.mu.Unlock()
	})
	return tenure.Follow{Get: get, Wake: wake, Announced: true}.Start(ctx), nil
}

// watched is the record a watch follows: [Node.Get]'s, except that a
// coordinator still in its handover names no holder, and that a closed
// node gives its farewell if it was coordinator (the same epoch, no
// holder), else [tenure.ErrClosed], which ends the watch.
func (n *Node) watched(context.Context) (tenure.Record, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed && !n.isCoordinator() {
		return tenure.Record{}, tenure.ErrClosed
	}
	r := n.recordLocked(time.Now())
	if n.closed || !n.granting() && n.isCoordinator() {
		r.Holder, r.TTL, r.Remaining = "", 0, 0
	}
	return r, nil
}

// endWatches ends every watch when the node closes. A coordinator's
// watches are woken once more, so they deliver its farewell (see
// [Node.Watch]), and given a heartbeat for it to be read; the others end
// at once. The caller holds mu and has set closed.
func (n *Node) endWatches() {
	for w, cancel := range n.watchers {
		if n.isCoordinator() {
			select {
			case w <- struct{}{}:
			default: // a wake is already queued
			}
			time.AfterFunc(n.cfg.Heartbeat, cancel)
		} else {
			cancel()
		}
		close(w)
		delete(n.watchers, w)
	}
}

// Close implements [tenure.Store]: the node leaves the group silently (no
// more heartbeats; the others detect it by timeout), its transport closes,
// watches end and later calls return [tenure.ErrClosed]. Close waits for the
// node's goroutine; it is idempotent.
func (n *Node) Close() error {
	if n.leave() {
		<-n.done
		return n.tr.Close()
	}
	return nil
}

// leave marks the node closed, stops its goroutine and ends its watches.
// It reports false if the node had already left.
func (n *Node) leave() (first bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if first = !n.closed; first {
		n.closed = true
		close(n.stop)
		n.endWatches()
	}
	return first
}

// Defaults implements [tenure.Defaulter]: the node campaigns as its own
// member ID, with a TTL of three failure-detector timeouts. A deposed
// coordinator's task is cancelled as soon as its node learns of it (its
// Watch pushes the loss); the TTL bounds how long a successor waits for a
// deposed coordinator whose elector never releases nor comes back (see
// the package doc).
func (n *Node) Defaults() (identity string, ttl time.Duration) {
	return strconv.FormatUint(n.self, 10), 3 * n.cfg.Timeout
}

var _ tenure.Defaulter = (*Node)(nil)
