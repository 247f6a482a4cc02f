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
// returns the lease and the time the successful request was sent, from
// which the renew deadline counts. It wakes on a watch event where the store
// watch, when the holder's grant is due to expire, and, while it cannot
// watch, polls every jittered RetryInterval; store errors back off
// exponentially up to TTL.
func (e *Elector) campaign(ctx context.Context) (Lease, time.Time, error) {
	c := &e.cfg
	var watch <-chan Record
	stopWatch := func() {}
	defer func() { stopWatch() }()
	failures := 0
	var known Record // the holder last seen, for EventLeaderChanged
	for {
		if err := ctx.Err(); err != nil {
			return Lease{}, time.Time{}, err
		}
		if watch == nil && failures == 0 {
			stopWatch()
			var err error
			if watch, stopWatch, err = watchWithin(ctx, c.Clock, c.Store, c.Key, c.RequestTimeout); err != nil && ctx.Err() == nil {
				e.logStoreError("tenure: cannot watch the key; polling instead", err)
			}
		}
		if err := e.beforeAcquire(ctx); err != nil {
			return Lease{}, time.Time{}, err
		}
		start := c.Clock.Now()
		rctx, cancel := e.requestContext(ctx, time.Time{})
		lease, err := acquire(rctx, c)
		cancel()
		took := c.Clock.Now().Sub(start)
		if err == nil {
			e.emit(Event{Kind: EventAcquired, Term: lease.Term, Took: took})
			return lease, start, nil
		}
		e.emit(Event{Kind: EventAcquireFailed, Err: err, Took: took})
		var wait time.Duration
		var held *HeldError
		switch {
		case errors.As(err, &held):
			failures = 0
			e.noteHolder(&known, held.Record)
			wait = e.heldWait(held.Record, watch != nil)
		case isPermanent(err):
			return Lease{}, time.Time{}, err
		case ctx.Err() != nil:
			return Lease{}, time.Time{}, ctx.Err()
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
			return Lease{}, time.Time{}, ctx.Err()
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

// acquire asks c.Store for the key, publishing c.Value if there is one
// (Validate made sure the store is then a Publisher).
func acquire(ctx context.Context, c *Config) (Lease, error) {
	if p, ok := c.Store.(Publisher); ok && c.Value != "" {
		return p.AcquireClaim(ctx, c.Key, Claim{Identity: c.Identity, TTL: c.TTL, Value: c.Value})
	}
	return c.Store.Acquire(ctx, c.Key, c.Identity, c.TTL)
}
