package tenure

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// minWait keeps a candidate that was told "expires in 0s" from spinning.
const minWait = time.Millisecond

// campaign tries to acquire the lease until it succeeds or ctx is done. It
// returns the grant: the lease, when the successful request was sent, and
// the deadline the term starts from. Once refused, it wakes on a watch event
// where the store can watch, when the holder's grant is due to expire, and,
// while it cannot watch, polls every jittered RetryInterval; store errors
// back off exponentially up to TTL.
func (e *Elector) campaign(ctx context.Context) (_ grant, err error) {
	c := &e.cfg
	// unsure is set while the last acquisition failed without an answer:
	// the store may have made the grant. In a session, nothing would let
	// it expire, so an elector that stops asking gives it back.
	unsure := false
	defer func() {
		if err != nil && unsure && c.Session != nil {
			c.Session.settle(c.Key, c.Identity, c.Value)
		}
	}()
	var watch <-chan Record
	stopWatch := func() {}
	defer func() { stopWatch() }()
	failures := 0
	var known Record // the holder last seen, for EventLeaderChanged
	for {
		if err := ctx.Err(); err != nil {
			return grant{}, err
		}
		if err := e.beforeAcquire(ctx); err != nil {
			return grant{}, err
		}
		start := c.Clock.Now()
		gr, err := e.acquire(ctx, start)
		took := c.Clock.Now().Sub(start)
		e.keyAnswered(err)
		unsure = err != nil && !errors.Is(err, ErrHeld) && !isPermanent(err)
		if err == nil && e.crossedStepDown(ctx, gr) {
			continue // given back; beforeAcquire holds back
		}
		if err == nil {
			e.emit(Event{Kind: EventAcquired, Term: gr.lease.Term, Took: took})
			return gr, nil
		}
		e.emit(Event{Kind: EventAcquireFailed, Err: err, Took: took})
		var wait time.Duration
		var held *HeldError
		switch {
		case errors.As(err, &held):
			failures = 0
			e.noteHolder(&known, held.Record)
			if watch == nil {
				// Watched from the first refusal on: a free key costs one request.
				// The watch delivers the record at once: no release is missed.
				stopWatch()
				var werr error
				if watch, stopWatch, werr = watchWithin(ctx, c.Clock, c.Store, c.Key, c.RequestTimeout); werr != nil && ctx.Err() == nil {
					e.logStoreError("tenure: cannot watch the key; polling instead", werr)
				}
			}
			wait = e.heldWait(held.Record, watch != nil)
		case isPermanent(err):
			return grant{}, err
		case ctx.Err() != nil:
			return grant{}, ctx.Err()
		default:
			failures++
			wait = c.jittered(min(c.RetryInterval<<min(failures-1, 16), c.TTL))
			if errors.Is(err, ErrUnavailable) {
				c.Logger.Debug("tenure: store unavailable, retrying", "key", c.Key, "id", c.Identity, "err", err, "retry_in", wait)
			} else {
				e.logStoreError("tenure: acquire failed, retrying", err, "retry_in", wait)
			}
			e.setError(err)
		}
		var ok bool
		if watch, ok = e.waitForChange(ctx, watch, wait, &known); !ok {
			return grant{}, ctx.Err()
		}
	}
}

// heldWait is how long to wait before retrying a key held by r. Without a
// watch, a candidate polls every jittered RetryInterval. With one, it
// relies on the watch, which must report releases and expiries (the
// Reader.Watch contract, checked by the conformance suite), and re-checks only
// as a safety net, watchSafetyTTLs TTLs after the holder's grant is due to
// expire: an idle candidate then costs the store almost nothing.
func (e *Elector) heldWait(r Record, watching bool) time.Duration {
	if watching {
		return addSat(max(r.Remaining, minWait), e.cfg.jittered(watchSafetyTTLs*e.cfg.TTL))
	}
	wait := r.Remaining
	if wait <= 0 {
		wait = e.cfg.RetryInterval
	}
	return max(min(wait, e.cfg.jittered(e.cfg.RetryInterval)), minWait)
}

// watchSafetyTTLs is how many TTLs past a holder's expiry a watching
// candidate re-checks the key in case its watch missed the expiry.
const watchSafetyTTLs = 4

// waitForChange waits for d, a watch delivery that says the key may be free,
// or ctx. It returns the watch channel to keep using (nil once it closed)
// and false if ctx is done. A nil watch is never ready, so it just waits.
func (e *Elector) waitForChange(ctx context.Context, watch <-chan Record, d time.Duration, known *Record) (<-chan Record, bool) {
	t := e.cfg.Clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return watch, false
		case <-t.C():
			return watch, true
		case r, ok := <-watch:
			if !ok {
				// The watch ended (a lost connection): poll until the next
				// round sets up a new one.
				watch = nil
				t.Reset(min(d, e.cfg.jittered(e.cfg.RetryInterval)))
				continue
			}
			e.noteHolder(known, r)
			if !r.Held() || r.Holder == e.cfg.Identity {
				return watch, true
			}
			// Held by someone, perhaps a new holder: wait for its expiry.
			t.Reset(e.heldWait(r, true))
		}
	}
}

// noteHolder records the holder seen and reports a change as an event.
func (e *Elector) noteHolder(known *Record, r Record) {
	if r.Holder == known.Holder && r.Term == known.Term {
		return
	}
	*known = r
	if e.sawHolder(r) {
		e.emit(Event{Kind: EventLeaderChanged, Holder: r.Holder, Term: r.Term})
	}
}

// watchWithin sets up a watch of key, giving up after timeout on clock: a
// watch whose setup hangs (a stuck stream, an exhausted pool) must not stall
// a caller that can poll instead. stop ends the watch; call it once done
// with the channel. On error the channel is nil and stop does nothing.
func watchWithin(ctx context.Context, clock Clock, w Reader, key string, timeout time.Duration) (ch <-chan Record, stop context.CancelFunc, err error) {
	wctx, cancel := context.WithCancel(ctx)
	type result struct {
		ch  <-chan Record
		err error
	}
	res := make(chan result, 1)
	go func() {
		ch, err := w.Watch(wctx, key)
		res <- result{ch, err}
	}()
	t := clock.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-res:
		if r.err == nil {
			return r.ch, cancel, nil
		}
		err = r.err
	case <-t.C():
		err = fmt.Errorf("tenure: watch of %q not set up within %s", key, timeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	cancel()
	return nil, func() {}, err
}

// grant is what a campaign won.
type grant struct {
	lease Lease
	// sent is when the winning request was sent, from which the lease's
	// Wait counts.
	sent time.Time
	// deadline is when the leader context is cancelled at the latest
	// unless a renewal (or, in a session, a keep-alive) succeeds first.
	deadline time.Time
	// session is the grant's place in a Session; nil without one.
	session *sessionGrant
}

// acquire asks the store for the key, sent at start, publishing c.Value if
// there is one (Validate made sure the store is then a Publisher), in
// c.Session if there is one. Every request is bounded by RequestTimeout
// from when it is sent.
func (e *Elector) acquire(ctx context.Context, start time.Time) (grant, error) {
	c := &e.cfg
	if c.Session != nil {
		return e.acquireInSession(ctx)
	}
	ctx, cancel := e.requestContext(ctx, time.Time{})
	defer cancel()
	var lease Lease
	var err error
	if p, ok := c.Store.(Publisher); ok && c.Value != "" {
		lease, err = p.AcquireClaim(ctx, c.Key, Claim{Identity: c.Identity, TTL: c.TTL, Value: c.Value})
	} else {
		lease, err = c.Store.Acquire(ctx, c.Key, c.Identity, c.TTL)
	}
	return grant{lease: lease, sent: start, deadline: start.Add(c.RenewDeadline)}, err
}

// acquireInSession acquires the key in c.Session's store session. The
// grant lives as long as the session, so its deadline is the session's.
func (e *Elector) acquireInSession(ctx context.Context) (grant, error) {
	c := &e.cfg
	g, err := c.Session.current(ctx)
	if err != nil {
		return grant{}, err
	}
	lease, sent, err := g.acquire(ctx, c.Key, c.Identity, c.Value)
	if err != nil {
		return grant{}, err
	}
	// Room for the session's cause and the control watch's.
	sg := &sessionGrant{lease: lease, e: e, gen: g, lost: make(chan error, 2)}
	deadline, err := g.add(sg, sent)
	if err != nil {
		// The session ended while the grant was being made, or the grant
		// already led: give it back; unless another grant of the session
		// holds it still, whose Resign releases it.
		g.forget(ctx, sg, !errors.Is(err, ErrHeld))
		return grant{}, err
	}
	return grant{lease: lease, sent: sent, deadline: deadline, session: sg}, nil
}
