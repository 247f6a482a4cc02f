package tenure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// generation is one store session of a [Session], from OpenSession until
// it ends and every grant in it is forgotten.
type generation struct {
	s       *Session
	ss      StoreSession
	stop    context.CancelFunc // stops keep; nil until it runs
	done    chan struct{}      // closed when the generation ends
	closed  chan struct{}      // closed once the store session is closed
	batches batches            // Acquires gathered for a BatchAcquirer

	mu       sync.Mutex
	sent     time.Time // when OpenSession was sent; keep-alives count from it
	deadline time.Time // sent + RenewDeadline; later deadlines are in settled
	grants   map[*sessionGrant]struct{}
	used     map[string]uint64 // the highest term of each key handed to an elector
	kaSent   uint64            // keep-alives sent so far
	// settled is the last few deadlines, with when each was known: a
	// grant is covered by a keep-alive only if the store had the grant
	// before the keep-alive arrived.
	settled []settledDeadline
	cause   error // why it ended; set before done is closed
	ending  bool  // end was called
	shut    bool  // the store session is being closed
}

// settledDeadline is a deadline and when the keep-alive (or the
// OpenSession) that set it had returned.
type settledDeadline struct{ at, deadline time.Time }

// settledKept is how many settled deadlines a generation remembers.
const settledKept = 4

// sessionGrant is one grant of an elector in a generation.
type sessionGrant struct {
	lease Lease
	seq   uint64   // keep-alives sent before the grant was added
	e     *Elector // nil once a Leadership holds the grant
	gen   *generation
	term  *Term      // nil until the elector leads
	lost  chan error // receives the cause that ends this grant (and the control watch's)
	once  sync.Once  // the grant ends once
	// onLost, once set (by leadAlone), is called with the cause instead
	// of sending it on lost. Guarded by gen.mu.
	onLost func(error)
}

// notify ends the grant with cause, once.
func (sg *sessionGrant) notify(cause error) {
	sg.once.Do(func() {
		sg.gen.mu.Lock()
		f := sg.onLost
		sg.gen.mu.Unlock()
		if f != nil {
			f(cause)
			return
		}
		sg.lost <- cause
	})
}

// add registers a grant made in the generation and returns the deadline
// its term starts from: the generation's. It fails with the cause if the
// generation already ended, and if the grant already led once. A grant
// that another grant of the generation still holds (the store handed the
// key's live grant back to a second campaign of the same identity) fails
// with a *[HeldError]: the caller must wait for its release as for any
// holder, and must not give it back, which would release the key under
// its leader.
func (g *generation) add(sg *sessionGrant, sent time.Time) (time.Time, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.holds(sg.lease) {
		l := sg.lease
		return time.Time{}, &HeldError{Record: Record{Key: l.Key, Holder: l.Identity, Term: l.Term, TTL: l.TTL, Remaining: l.TTL, Value: l.Value}}
	}
	if g.ending {
		return time.Time{}, g.cause
	}
	deadline, ok := g.coveredSince(sent)
	if !ok {
		return time.Time{}, fmt.Errorf("tenure: keep-alives of the session kept completing during the acquisition of %q: %w",
			sg.lease.Key, ErrUnavailable)
	}
	l := sg.lease
	if g.used[l.Key] >= l.Term {
		// A grant an elector already led with, whose release failed: the
		// store handed it back. Every term leads once.
		return time.Time{}, fmt.Errorf("tenure: the session still held term %d of %q, already led; giving it back: %w",
			l.Term, l.Key, ErrUnavailable)
	}
	if g.used == nil {
		g.used = map[string]uint64{}
	}
	g.used[l.Key] = l.Term
	sg.seq = g.kaSent
	g.grants[sg] = struct{}{}
	return deadline, nil
}

// holds reports whether a grant of the generation holds l's term of l's
// key: it leads, or its leadership ended and its release is still to come.
// Called with g.mu held.
func (g *generation) holds(l Lease) bool {
	if g.used[l.Key] < l.Term {
		return false
	}
	for sg := range g.grants {
		if sg.lease.Key == l.Key && sg.lease.Term == l.Term {
			return true
		}
	}
	return false
}

// coveredSince returns the deadline of the last keep-alive (or the
// OpenSession) that had returned by sent, when an acquisition was sent:
// the store had its effect before it had the grant, so it covers the
// grant whatever the store. A keep-alive still in flight then may not.
// Called with g.mu held.
func (g *generation) coveredSince(sent time.Time) (time.Time, bool) {
	for i := len(g.settled) - 1; i >= 0; i-- {
		if !g.settled[i].at.After(sent) {
			return g.settled[i].deadline, true
		}
	}
	return time.Time{}, false
}

// lead attaches the leader's term to sg, so that keep-alives extend it.
func (g *generation) lead(sg *sessionGrant, t *Term) {
	g.mu.Lock()
	sg.term = t
	g.mu.Unlock()
}

// leadAlone attaches t to sg for a [Leadership]: keep-alives extend t,
// and the cause that ends the grant goes to onLost, at once if it came
// already. The elector that campaigned is let go.
func (g *generation) leadAlone(sg *sessionGrant, t *Term, onLost func(error)) {
	g.mu.Lock()
	sg.term, sg.onLost, sg.e = t, onLost, nil
	g.mu.Unlock()
	select {
	case cause := <-sg.lost:
		onLost(cause)
	default:
	}
}

// forget removes sg, releasing its grant first unless it is known gone;
// the store session of an ended generation closes with its last grant.
// Release is best effort, like [Elector] release.
func (g *generation) forget(ctx context.Context, sg *sessionGrant, release bool) {
	if release {
		c := &g.s.cfg
		rctx, cancel := g.s.requestContext(context.WithoutCancel(ctx))
		if err := g.ss.Release(rctx, sg.lease); err != nil && !errors.Is(err, ErrLost) && !errors.Is(err, ErrClosed) {
			c.Logger.Warn("tenure: release failed; retrying in the background", "key", sg.lease.Key, "id", sg.lease.Identity, "err", err, "term", sg.lease.Term)
			g.s.background(func(ctx context.Context) { g.retryRelease(ctx, sg.lease) })
		}
		cancel()
	}
	g.mu.Lock()
	delete(g.grants, sg)
	g.mu.Unlock()
	g.closeIfDone()
}

// releaseRetries is how many more times a failed release of a session
// grant is tried, RetryInterval apart: the session's keep-alives would
// otherwise keep the grant until the session ends.
const releaseRetries = 3

// retryRelease releases l in the background until it is done, the store
// says it is gone, or the generation ends (which ends l with it).
func (g *generation) retryRelease(ctx context.Context, l Lease) {
	c := &g.s.cfg
	for range releaseRetries {
		if !sleepUnless(ctx, g.done, c.Clock, c.RetryInterval) {
			return
		}
		rctx, cancel := g.s.requestContext(ctx)
		err := g.ss.Release(rctx, l)
		cancel()
		if err == nil || errors.Is(err, ErrLost) || errors.Is(err, ErrClosed) {
			return
		}
	}
	c.Logger.Warn("tenure: release failed; the grant ends with the session instead", "key", l.Key, "term", l.Term)
}

// settle gives back a grant the store may have made to identity in the
// session although the Acquire that asked for it failed (its reply lost),
// for an elector that stopped asking: it asks again, which returns such a
// grant, and releases what it gets. Best effort, in the background.
func (s *Session) settle(key, identity, value string) {
	s.mu.Lock()
	g := s.cur
	s.mu.Unlock()
	if g == nil {
		return // no session, or it ended, and its grants with it
	}
	c := &s.cfg
	s.background(func(ctx context.Context) {
		ctx, cancel := withDeadline(ctx, c.Clock, c.Clock.Now().Add(2*c.RequestTimeout), errRequestTimeout)
		defer cancel()
		l, err := g.ss.Acquire(ctx, key, identity, value)
		if err != nil || !g.claim(l) {
			return
		}
		_ = g.ss.Release(ctx, l)
	})
}

// claim reserves grant l for giving back, unless an elector of the session
// was handed it already: another elector for the same key may have been
// given the very grant (a store returns a session's grant to a retry), and
// releasing it would end that elector's grant under its task. Once
// claimed, no elector is handed it (see add).
func (g *generation) claim(l Lease) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.used[l.Key] >= l.Term {
		return false
	}
	if g.used == nil {
		g.used = map[string]uint64{}
	}
	g.used[l.Key] = l.Term
	return true
}

// sleepUnless waits d on clock and reports true, or false as soon as ctx
// is done or stop is closed.
func sleepUnless(ctx context.Context, stop <-chan struct{}, clock Clock, d time.Duration) bool {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// end ends the generation with cause: every grant in it receives cause on
// its lost channel, and the store session is closed once they are all
// forgotten (their tasks returned), never before: closing it frees the
// keys for other candidates.
func (g *generation) end(cause error) {
	g.mu.Lock()
	if g.ending {
		g.mu.Unlock()
		return
	}
	g.ending, g.cause = true, cause
	grants := make([]*sessionGrant, 0, len(g.grants))
	for sg := range g.grants {
		grants = append(grants, sg)
	}
	g.mu.Unlock()
	s := g.s
	s.mu.Lock()
	if s.cur == g {
		s.cur = nil
	}
	s.mu.Unlock()
	if g.stop != nil {
		g.stop()
	}
	close(g.done)
	for _, sg := range grants {
		sg.notify(cause)
	}
	g.closeIfDone()
}

// closeIfDone closes the store session of an ended generation without
// grants, once.
func (g *generation) closeIfDone() {
	g.mu.Lock()
	shut := g.ending && !g.shut && len(g.grants) == 0
	if shut {
		g.shut = true
	}
	lost := errors.Is(g.cause, ErrLost)
	g.mu.Unlock()
	if !shut {
		return
	}
	go func() {
		defer close(g.closed)
		if lost {
			return // the store already ended it
		}
		c := &g.s.cfg
		ctx, cancel := g.s.requestContext(context.Background())
		defer cancel()
		if err := g.ss.Close(ctx); err != nil && !errors.Is(err, ErrLost) && !errors.Is(err, ErrClosed) {
			c.Logger.Warn("tenure: closing the session failed; its grants will expire instead", "err", err)
		}
	}()
}

// keep sends keep-alives every RenewInterval until ctx is done, and ends
// the generation when one fails definitively or none succeeds before the
// renew deadline.
func (g *generation) keep(ctx context.Context) {
	c := &g.s.cfg
	g.mu.Lock()
	sent, deadline := g.sent, g.deadline
	g.mu.Unlock()
	tick := c.Clock.NewTimer(c.RenewInterval - c.Clock.Now().Sub(sent))
	defer tick.Stop()
	due := c.Clock.NewTimer(deadline.Sub(c.Clock.Now()))
	defer due.Stop()
	type result struct {
		k    uint64 // which keep-alive
		sent time.Time
		gone []Lease
		err  error
	}
	results := make(chan result, 1)
	busy := false
	over := false // the generation ended: keep waits for ctx only
	for {
		select {
		case <-ctx.Done():
			if busy {
				<-results
			}
			return
		case <-due.C():
			err := fmt.Errorf("%w (%s after the session's last successful keep-alive was sent)", ErrRenewDeadline, c.RenewDeadline)
			g.end(err)
			over = true
			g.report(SessionKeepAlive{Sent: deadline.Add(-c.RenewDeadline), Err: err}, deadline, false)
		case <-tick.C():
			if busy || over {
				continue
			}
			busy = true
			at := c.Clock.Now()
			g.mu.Lock()
			g.kaSent++
			k := g.kaSent
			g.mu.Unlock()
			limit := at.Add(c.RequestTimeout)
			if deadline.Before(limit) {
				limit = deadline
			}
			rctx, cancel := withDeadline(ctx, c.Clock, limit, errRequestTimeout)
			go func() {
				defer cancel()
				gone, err := g.ss.KeepAlive(rctx)
				results <- result{k, at, gone, err}
			}()
		case r := <-results:
			busy = false
			if over {
				continue
			}
			now := c.Clock.Now()
			err := r.err
			switch {
			case r.err == nil && now.Before(deadline):
				deadline = r.sent.Add(c.RenewDeadline)
				rearm(due, deadline.Sub(now)) // moved later: see rearm
				tick.Reset(c.RenewInterval - now.Sub(r.sent))
				g.extended(r.k, r.sent, now, deadline, r.gone)
			case r.err == nil:
				err = fmt.Errorf("%w (the session's keep-alive succeeded too late)", ErrRenewDeadline)
				g.end(err)
				over = true
			case errors.Is(r.err, ErrLost):
				g.end(r.err)
				over = true
			default:
				c.Logger.Warn("tenure: session keep-alive failed, retrying", "err", r.err, "retry_in", c.RetryInterval)
				tick.Reset(c.RetryInterval)
			}
			over = g.report(SessionKeepAlive{Sent: r.sent, Took: now.Sub(r.sent), Err: err, Gone: len(r.gone)}, deadline, !over) || over
		}
	}
}

// report hands k, with the grants the generation holds now (none once it
// ended), to [SessionConfig.OnKeepAlive] if set. OnKeepAlive must not
// block, but if it does past deadline (when guarded), the generation ends
// all the same, its terms with it, and report returns true: the
// keep-alive goroutine that would end it at the deadline is the caller.
func (g *generation) report(k SessionKeepAlive, deadline time.Time, guarded bool) (ended bool) {
	on := g.s.cfg.OnKeepAlive
	if on == nil {
		return false
	}
	g.mu.Lock()
	if !g.ending {
		k.Grants = len(g.grants)
	}
	g.mu.Unlock()
	if !guarded {
		on(k)
		return false
	}
	var guard callbackGuard
	guard.arm(func() time.Time { return deadline }, g.s.cfg.Clock, func() {
		g.end(fmt.Errorf("%w (%s after the session's last successful keep-alive was sent, while SessionConfig.OnKeepAlive blocked the session)", ErrRenewDeadline, g.s.cfg.RenewDeadline))
	})
	on(k)
	return !guard.returned()
}

// settle remembers deadline, known at now. Called with g.mu held.
func (g *generation) settle(now, deadline time.Time) {
	g.settled = append(g.settled, settledDeadline{now, deadline})
	if len(g.settled) > settledKept {
		g.settled = g.settled[len(g.settled)-settledKept:]
	}
}

// extended moves every grant's deadline after a successful keep-alive and
// ends the grants the store reported gone.
func (g *generation) extended(k uint64, sent, now, deadline time.Time, gone []Lease) {
	type key struct {
		k string
		t uint64
	}
	goneSet := make(map[key]bool, len(gone))
	for _, l := range gone {
		goneSet[key{l.Key, l.Term}] = true
	}
	g.mu.Lock()
	g.settle(now, deadline)
	var ended []*sessionGrant
	for sg := range g.grants {
		if goneSet[key{sg.lease.Key, sg.lease.Term}] {
			ended = append(ended, sg)
			continue
		}
		// Keep-alive k covers only the grants added before it was sent.
		if sg.term != nil && sg.seq < k {
			sg.term.extend(deadline)
			if sg.e != nil {
				sg.e.renewed(sent, now, deadline)
			}
		}
	}
	g.mu.Unlock()
	for _, sg := range ended {
		sg.notify(lostf("the grant of term %d of %q is gone (seen by the session's keep-alive)", sg.lease.Term, sg.lease.Key))
	}
}
