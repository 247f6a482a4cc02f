package tenure

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// errResigned is the cause of a [Leadership]'s context ended by Resign.
var errResigned = errors.New("tenure: leadership resigned")

// Leadership is one key led through a [Session] by [Session.Campaign]:
// the leader context and term of an [Elector]'s task, without the task. No
// goroutine serves it: the session's keep-alives extend it, and they or
// the session's end cancel its context, so a process can lead thousands
// of keys with nothing per key but the grant's bookkeeping (an Elector's
// Run costs two goroutines per key).
//
// The guarantee is the elector's: the context is cancelled no later than
// [Term.Deadline], before the store can grant the key to anyone else.
// What the caller does as leader must stop when the context is done; once
// it has, call Resign, which releases the key. The key is never released,
// and the store session never closed, before Resign: that is what tells
// the session that the caller's work for the key stopped.
//
// Its methods are safe for concurrent use.
type Leadership struct {
	sg     *sessionGrant
	term   *Term
	ctx    context.Context
	cancel context.CancelCauseFunc
	resign sync.Once

	sink  atomic.Pointer[eventSink] // set once EventElected was emitted
	ended sync.Once                 // the end is reported once
}

// Campaign campaigns for key as identity through the session, publishing
// value with the grant if it is not "" (the store must then be a
// [Publisher]), and returns once this process leads key. While the key is
// held by another, it waits as an [Elector] does: it watches the key from
// the first refusal and tries again when the key is released or expires.
// It blocks until it leads or ctx is done, then returns ctx's error; a
// closed session returns an error matching [ErrClosed], bad arguments one
// wrapping [ErrInvalid], and a key whose terms are exhausted one matching
// [ErrTermsExhausted]. Its ctx bounds the campaign only: the
// leadership lasts until Resign, a loss, or the session's Close, whatever
// ctx does after Campaign returned (its values are kept in the
// leadership's context).
//
// A grant whose renew deadline passed before it could lead, or that ends
// while its [Lease.Wait] runs, is given back and campaigned for again, as
// an Elector's Run does. Campaign is safe for concurrent use, also for the
// same key (the session hands out each term once).
func (s *Session) Campaign(ctx context.Context, key, identity, value string) (*Leadership, error) {
	if err := checkContext(ctx, "Session.Campaign"); err != nil {
		return nil, err
	}
	if err := checkCampaign(key, identity, value); err != nil {
		return nil, fmt.Errorf("Session.Campaign: %w", err)
	}
	c := &s.cfg
	e, err := New(Config{Key: key, Identity: identity, Value: value, Session: s, Clock: c.Clock, Logger: c.Logger, Rand: s.campaignRand(), OnEvent: c.OnEvent})
	if err != nil {
		return nil, err
	}
	for {
		gr, err := e.campaign(ctx)
		if err != nil {
			return nil, err
		}
		if l, ok := s.leadership(ctx, gr); ok {
			l.report(e)
			return l, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// checkCampaign validates Campaign's arguments as New would, with errors
// that name the arguments rather than Config fields.
func checkCampaign(key, identity, value string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := checkNotDerived("key", key); err != nil {
		return err
	}
	if err := checkName("identity", identity, MaxIdentityLen); err != nil {
		return err
	}
	return CheckValue(value)
}

// leadership turns gr, a grant of Campaign, into a Leadership once its
// Wait has run. It gives the grant back and reports false if its renew
// deadline passed already, if it ends during the Wait, or if ctx is done
// first.
func (s *Session) leadership(ctx context.Context, gr grant) (*Leadership, bool) {
	c, sg := &s.cfg, gr.session
	if !c.Clock.Now().Before(gr.deadline) {
		// The acquisition took so long that the store may regrant soon.
		sg.gen.forget(ctx, sg, true)
		return nil, false
	}
	t := newTerm(gr.lease, c.Clock, gr.sent, gr.deadline)
	lctx, cancel := context.WithCancelCause(context.WithValue(context.WithoutCancel(ctx), termKey{}, t))
	l := &Leadership{sg: sg, term: t, ctx: lctx, cancel: cancel}
	// From here the session's keep-alives extend t and its end cancels lctx.
	// The end is reported from a goroutine of its own: the session's
	// keep-alive goroutine ends every term it holds one after another,
	// and an OnEvent that blocked must not keep the next ones alive.
	sg.gen.leadAlone(sg, t, func(cause error) { cancel(cause); go l.reportEnd() })
	if gr.lease.Wait > 0 {
		start := c.Clock.NewTimer(gr.sent.Add(gr.lease.Wait).Sub(c.Clock.Now()))
		defer start.Stop()
		select {
		case <-start.C():
		case <-lctx.Done():
		case <-ctx.Done():
			cancel(context.Cause(ctx))
		}
	}
	if lctx.Err() != nil {
		l.Resign(ctx)
		return nil, false
	}
	t.base = c.Clock.Now()
	return l, true
}

// report emits, as Campaign's elector e does (logged, and handed to
// SessionConfig.OnEvent), that l began, and from then on reports its end
// (see reportEnd), once: from Resign's goroutine, or from one of its own
// when the session ends it. It keeps e's sink, not e: no goroutine while
// it leads, and little heap per key.
func (l *Leadership) report(e *Elector) {
	sink := e.sink()
	sink.emit(Event{Kind: EventElected, Term: l.term.lease.Term})
	l.sink.Store(&sink)
	if l.ctx.Err() != nil { // it ended before the sink was in place
		l.reportEnd()
	}
}

// reportEnd emits how l ended, once l's context is done and report has
// run: EventLost for a loss as an elector judges one (isLoss: the grant
// gone, the renew deadline), EventReleased after Resign or the session's
// Close. Before report it does nothing (report calls it).
func (l *Leadership) reportEnd() {
	sink := l.sink.Load()
	if sink == nil || l.ctx.Err() == nil {
		return
	}
	l.ended.Do(func() {
		term, cause := l.term.lease.Term, context.Cause(l.ctx)
		switch {
		case isLoss(cause): // the elector's rule for lost against released
			sink.emit(Event{Kind: EventLost, Term: term, Err: cause})
		case errors.Is(cause, errResigned):
			sink.emit(Event{Kind: EventReleased, Term: term})
		default: // the session's Close
			sink.emit(Event{Kind: EventReleased, Term: term, Err: cause})
		}
	})
}

// Context returns the leader context: it carries the term (see [TermFrom]
// and [LeaseFrom]) and is cancelled, with the cause as [context.Cause],
// when leadership ends or is in doubt: an error matching [ErrLost] or
// [ErrRenewDeadline], one matching [ErrClosed] after the session's Close,
// or after Resign.
func (l *Leadership) Context() context.Context { return l.ctx }

// Done is Context().Done().
func (l *Leadership) Done() <-chan struct{} { return l.ctx.Done() }

// Term returns the term's handle: its lease, and its deadline as
// keep-alives move it.
func (l *Leadership) Term() *Term { return l.term }

// Lease returns the grant. Pass its Term with every write to the protected
// resource (see [Lease.Term]).
func (l *Leadership) Lease() Lease { return l.term.lease }

// Resign ends the leadership: it cancels the context, if it is not done
// already, then releases the key unless the store is known to have ended
// the grant. Call it once the work done as leader has stopped, also after
// a loss, so that the store session can close when the session ends.
// ctx bounds the release (by the session's RequestTimeout too); a failed
// release is retried in the background and ends with the session at the
// latest. Calling Resign again does nothing. A nil ctx panics, as the
// context package does, and resigns nothing.
func (l *Leadership) Resign(ctx context.Context) {
	if ctx == nil {
		panic("tenure: Leadership.Resign with a nil context")
	}
	l.resign.Do(func() {
		l.cancel(errResigned)
		l.reportEnd()
		l.sg.gen.forget(ctx, l.sg, !errors.Is(context.Cause(l.ctx), ErrLost))
	})
}
