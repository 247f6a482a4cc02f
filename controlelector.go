package tenure

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// controlState is what an elector with [Config.Control] remembers between
// terms. Its fields are safe for concurrent use.
type controlState struct {
	// stepped is the control-key term of the last step-down request this
	// elector obeyed: while that request is live it holds back, even when
	// the request named nobody.
	stepped atomic.Uint64
	// done is the control-key term of the last request found done: the
	// key was taken in a later term than the one asked to step down (see
	// Elector.requestDone). It holds nobody back any more.
	done atomic.Uint64
	// gaveBack is the term of the last grant this elector gave back
	// because a step-down crossed its Acquire: its own, it does not make
	// the request done.
	gaveBack atomic.Uint64
	// warnMu guards the three fields below. The warning that the control
	// key is unusable (a peer store) is logged once, and only after the
	// key itself was answered without a permanent error: a store that
	// refuses everything (a bad URL, a Redis that may evict, a TTL the
	// store cannot grant) refuses the key too, and the caller reports that
	// one error alone.
	warnMu      sync.Mutex
	keyAnswered bool  // an Acquire of the key ended without a permanent error
	unusable    error // the control key's permanent error, not yet logged
	warned      bool  // the warning was logged

	mu     sync.Mutex
	others []Candidate // the other registered candidates, as last read
	// stale is set when the registration goroutine skipped a read of the
	// others because this elector led (see Elector.needList), and cleared
	// by the next read.
	stale atomic.Bool

	// pref is the key's preferred holder as last read (see [Prefer]);
	// prefOK is false when none was live. Guarded by mu.
	pref   Preference
	prefOK bool

	// keyRenewed receives, without blocking, after each renewal of the
	// key while this elector leads: the registration goroutine renews its
	// slot with the key (see Elector.awaitSlot). Nil without Config.Control.
	keyRenewed chan struct{}

	// firstSeen is when each other candidate was first seen registered,
	// without a break, on this elector's clock. Used by the registration
	// goroutine only.
	firstSeen map[string]time.Time
}

// noteKeyRenewed tells the registration goroutine, without blocking, that
// the key was just renewed.
func (s *controlState) noteKeyRenewed() {
	select {
	case s.keyRenewed <- struct{}{}:
	default: // one is pending already
	}
}

// setOthers records the other registered candidates, just read.
func (s *controlState) setOthers(cs []Candidate) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.others = cs
	s.stale.Store(false)
}

// setPreference records the key's preferred holder, just read.
func (s *controlState) setPreference(p Preference, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pref, s.prefOK = p, ok
}

// preferred returns the key's preferred holder as last read.
func (s *controlState) preferred() (Preference, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pref, s.prefOK
}

// rank is the number of head-start steps candidate id of priority p gives
// the other registered candidates: one per distinct priority above p, and,
// while a preferred holder other than id is registered (and may lead), one
// more for it; none at all for the preferred holder itself.
func (s *controlState) rank(id string, p int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	extra := 0
	if s.prefOK {
		if s.pref.Holder == id {
			return 0
		}
		for _, c := range s.others {
			if c.Identity == s.pref.Holder && c.Priority != NeverLead {
				extra = 1
			}
		}
	}
	seen := map[int]bool{}
	for _, c := range s.others {
		if c.Priority > p {
			seen[c.Priority] = true
		}
	}
	return len(seen) + extra
}

// blocks reports whether grant g keeps candidate id, leading term (0 when
// campaigning), from the key: a live request names term, or names another
// candidate, or names nobody and id obeyed it already.
func (s *controlState) blocks(g controlGrant, id string, term uint64) bool {
	switch {
	case term != 0 && g.term == term:
		return true
	case g.ctlTerm != 0 && s.done.Load() == g.ctlTerm:
		return false // done: the key was taken in a later term
	case g.to != "":
		return g.to != id
	}
	return s.stepped.Load() == g.ctlTerm
}

// controlRead reads the key's control grant; ok is false when there is
// none, or when it cannot be read (then the elector campaigns as if there
// were none: control is advisory, leadership is not held hostage to it).
func (e *Elector) controlRead(ctx context.Context) (controlGrant, bool) {
	rctx, cancel := e.requestContext(ctx, time.Time{})
	defer cancel()
	r, err := e.cfg.Store.Get(rctx, ControlKey(e.cfg.Key))
	if err != nil {
		e.controlError(err)
		return controlGrant{}, false
	}
	return parseControl(r)
}

// controlError logs a failed read of the control key: once as a warning
// if it can never work, else at debug level. The warning waits for the
// key's own Acquire to be answered (see keyAnswered): it is not logged if
// that Acquire fails for good, as it does when the store refuses all.
func (e *Elector) controlError(err error) {
	if isPermanent(err) {
		e.ctl.warnMu.Lock()
		defer e.ctl.warnMu.Unlock()
		if !e.ctl.keyAnswered {
			if e.ctl.unusable == nil {
				e.ctl.unusable = err
			}
			return
		}
		e.warnControlUnusable(err)
		return
	}
	e.cfg.Logger.Debug("tenure: cannot read the control key", "key", e.cfg.Key, "id", e.cfg.Identity, "err", err)
}

// keyAnswered records that an Acquire of the key ended with err, and logs
// the warning controlError held back if err is not permanent.
func (e *Elector) keyAnswered(err error) {
	if e.cfg.Control == nil || isPermanent(err) {
		return
	}
	e.ctl.warnMu.Lock()
	defer e.ctl.warnMu.Unlock()
	e.ctl.keyAnswered = true
	if e.ctl.unusable != nil {
		e.warnControlUnusable(e.ctl.unusable)
		e.ctl.unusable = nil
	}
}

// warnControlUnusable logs, once, that the control key cannot be used.
// Called with e.ctl.warnMu held.
func (e *Elector) warnControlUnusable(err error) {
	if !e.ctl.warned {
		e.ctl.warned = true
		e.logStoreError("tenure: the store refuses the control key; step-down requests are ignored", err)
	}
}

// beforeAcquire is what a candidate with Config.Control does before each
// Acquire: never, at priority NeverLead (it blocks until ctx is done);
// hold back while a step-down request is for another candidate; give the
// higher priorities their head start, then check for a request again, so
// that one made during the head start is obeyed. The named successor of a
// request goes at once. A former leader whose list of the other
// candidates went unread while it led first reads it (CandidateSlots
// store requests). It returns ctx's error if ctx ends first; without
// Config.Control it returns at once.
func (e *Elector) beforeAcquire(ctx context.Context) error {
	ctl := e.cfg.Control
	if ctl == nil {
		return nil
	}
	if ctl.Priority == NeverLead {
		<-ctx.Done()
		return ctx.Err()
	}
	if e.ctl.stale.Load() {
		e.listOthers(ctx, false)
	}
	headStart := time.Duration(e.ctl.rank(e.cfg.Identity, ctl.Priority)) * cmp.Or(ctl.Step, e.cfg.RetryInterval)
	for {
		g, ok := e.controlRead(ctx)
		switch {
		case ok && g.to == e.cfg.Identity:
			return ctx.Err() // the named successor: no head start for others
		case ok && e.ctl.blocks(g, e.cfg.Identity, 0):
			if e.requestDone(ctx, g) {
				continue
			}
			e.cfg.Logger.Debug("tenure: holding back while a step-down is for another candidate",
				"key", e.cfg.Key, "id", e.cfg.Identity, "to", g.to, "window_left", g.remaining)
			// Looked at again at least once per TTL: requestDone.
			if !e.awaitControlChange(ctx, g, true, min(g.remaining+expiryMargin, e.cfg.TTL)) {
				return ctx.Err()
			}
		case headStart > 0:
			// A request made meanwhile ends the head start: it may name us.
			if !e.awaitControlChange(ctx, g, ok, headStart) {
				return ctx.Err()
			}
			headStart = 0
		default:
			return nil
		}
	}
}

// requestDone reports whether request g is done: the key's record shows
// a later term than the one g asked to step down, so the candidate it
// named (or another, if it named none) took the key since. From then on
// it holds nobody back (controlState.done): before, a candidate named by
// a request nobody released (step-down --no-wait, a library caller)
// that led and then stopped or died left the others holding back, the
// key unled, for the rest of the window (found auditing the raft peer
// mode, which had the same hole). Whoever takes the key next does so as
// after any failover: the grants decide, not the request. A read that
// fails reports false. It blocks for one store request.
func (e *Elector) requestDone(ctx context.Context, g controlGrant) bool {
	rctx, cancel := e.requestContext(ctx, time.Time{})
	defer cancel()
	r, err := e.cfg.Store.Get(rctx, e.cfg.Key)
	if err != nil || r.Term <= g.term || r.Term == e.ctl.gaveBack.Load() {
		return false
	}
	e.ctl.done.Store(g.ctlTerm)
	e.cfg.Logger.Debug("tenure: a step-down's hand-over is done; no longer holding back",
		"key", e.cfg.Key, "id", e.cfg.Identity, "to", g.to, "term", r.Term)
	return true
}

// crossedStepDown checks, with Config.Control, that no step-down request
// blocking this candidate was made while its Acquire was on its way: one
// read of the control key before each Acquire cannot see a request made
// just after it, with the old leader's release coming before the Acquire.
// If one was, it gives gr back, before any task starts, and reports true;
// the next beforeAcquire then holds back. Without Config.Control, or if
// the control key cannot be read, it reports false.
func (e *Elector) crossedStepDown(ctx context.Context, gr grant) bool {
	if e.cfg.Control == nil {
		return false
	}
	g, ok := e.controlRead(ctx)
	if !ok || g.to == e.cfg.Identity || !e.ctl.blocks(g, e.cfg.Identity, 0) {
		return false
	}
	e.cfg.Logger.Info("tenure: a step-down for another candidate came while acquiring; giving the grant back",
		"key", e.cfg.Key, "id", e.cfg.Identity, "term", gr.lease.Term, "to", g.to)
	e.ctl.gaveBack.Store(gr.lease.Term)
	e.giveBack(ctx, gr, true)
	return true
}

// awaitControlChange waits d, or until the control key shows another
// request than g (live says whether g was one), whichever comes first: a
// request released early, replaced, or made. It watches the control key,
// or without a watch just sleeps. It reports false if ctx ended first.
func (e *Elector) awaitControlChange(ctx context.Context, g controlGrant, live bool, d time.Duration) bool {
	c := &e.cfg
	ch, stop, err := watchWithin(ctx, c.Clock, c.Store, ControlKey(c.Key), c.RequestTimeout)
	defer stop()
	if err != nil {
		return sleep(ctx, c.Clock, d)
	}
	t := c.Clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case r, ok := <-ch:
			if !ok {
				return true
			}
			if now, ok := parseControl(r); ok != live || ok && now.ctlTerm != g.ctlTerm {
				return true
			}
		}
	}
}

// watchControl watches the control key while l is held and sends on lost
// an error matching [ErrSteppedDown] once a live request blocks l (see
// controlState.blocks). It returns a channel closed when it is done: when
// ctx is done, after sending, or at once without Config.Control. A watch
// that fails is set up again after RetryInterval; one the store refuses
// for good is given up.
func (e *Elector) watchControl(ctx context.Context, l Lease, lost chan<- error) <-chan struct{} {
	done := make(chan struct{})
	if e.cfg.Control == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		c := &e.cfg
		for ctx.Err() == nil {
			ch, stop, err := watchWithin(ctx, c.Clock, c.Store, ControlKey(c.Key), c.RequestTimeout)
			if err == nil {
				g, asked := e.awaitStepDown(ctx, l, ch)
				stop()
				if asked {
					e.ctl.stepped.Store(g.ctlTerm)
					lost <- stepDownError(g)
					return
				}
			} else if ctx.Err() == nil {
				e.controlError(err)
				if isPermanent(err) {
					return
				}
			}
			if !sleep(ctx, c.Clock, c.RetryInterval) {
				return
			}
		}
	}()
	return done
}

// awaitStepDown reads ch until a request blocks l, and returns it; asked
// is false when ch closes or ctx is done.
func (e *Elector) awaitStepDown(ctx context.Context, l Lease, ch <-chan Record) (g controlGrant, asked bool) {
	for {
		select {
		case <-ctx.Done():
			return g, false
		case r, ok := <-ch:
			if !ok {
				return g, false
			}
			if g, ok := parseControl(r); ok && e.ctl.blocks(g, e.cfg.Identity, l.Term) {
				return g, true
			}
		}
	}
}

// stepDownError is the cause of a leader context ended by request g.
func stepDownError(g controlGrant) error {
	if g.to == "" {
		return fmt.Errorf("%w (any other candidate may take over)", ErrSteppedDown)
	}
	return fmt.Errorf("%w (handing over to %q)", ErrSteppedDown, g.to)
}
