package shard

import (
	"context"
	"errors"
	"time"

	"github.com/tenurehq/tenure"
)

// runKey decides, for one key, whether this member leads it, and leads it
// through a [tenure.Elector] while it should, until ctx is done (it then
// returns nil) or an elector meets a permanent store error (returned),
// except [tenure.ErrTermsExhausted], which parks this key alone: it is
// logged and tried again a TTL later or when the live set changes.
//
// The rule, re-applied at every change of the live set:
//   - not live itself: lead nothing;
//   - owner ([Assign] among the live set): campaign and lead until the live
//     set names another owner;
//   - ranked r ≥ 1 ([Rank]): watch the key; if it stays unled for
//     r × Takeover with the live set unchanged, campaign as a fallback and
//     lead until the live set changes or Reclaim has passed; stop
//     campaigning at once if another member takes the key first.
//
// Giving a key up cancels its task and releases its lease only after the
// task returned (that is what [tenure.Elector.Run] does when its context
// ends), so the next holder, which must acquire the lease first, starts
// after the old task stopped.
func (s *Sharder) runKey(ctx context.Context, key string, sess *tenure.Session, task Task) error {
	me := s.cfg.Identity
	for ctx.Err() == nil {
		v := s.view()
		var err error
		switch r := v.rank(key, me); {
		case r < 0:
			select {
			case <-ctx.Done():
			case <-v.changed:
			}
		case r == 0:
			err = s.lead(ctx, key, sess, task, func(ctx context.Context) {
				for {
					select {
					case <-ctx.Done():
						return
					case <-v.changed:
						if v = s.view(); v.rank(key, me) != 0 {
							return
						}
					}
				}
			})
		default:
			if !s.awaitUnled(ctx, key, v, r) {
				continue
			}
			s.cfg.Logger.Info("shard: leading a key its owner left unled", "group", s.cfg.Group, "key", key,
				"id", me, "owner", v.owner(key), "rank", r, "unled_for", time.Duration(r)*s.cfg.Takeover)
			err = s.lead(ctx, key, sess, task, func(ctx context.Context) { s.holdFallback(ctx, key, v) })
		}
		if errors.Is(err, tenure.ErrTermsExhausted) {
			// One key's record was forged to the top of its term range:
			// only an operator can repair it, and the elector does not
			// retry it. Say so, and try again a TTL later or when the
			// live set changes, the other keys going on meanwhile.
			s.cfg.Logger.Error("shard: cannot lead a key whose terms are exhausted; its record must be repaired",
				"group", s.cfg.Group, "key", key, "id", me, "err", err)
			s.parkKey(ctx, v)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parkKey waits a TTL, until the live set changes from v, or ctx is done.
func (s *Sharder) parkKey(ctx context.Context, v *view) {
	t := s.cfg.Clock.NewTimer(s.cfg.TTL)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-v.changed:
	case <-t.C():
	}
}

// lead campaigns for key (in sess, if not nil) and runs task whenever elected, until hold
// returns or ctx is done; then it cancels the task, waits for it, and
// releases the lease. hold runs in the caller's goroutine with a context
// that ends if the elector stops by itself. lead returns the elector's
// error unless it is a context error.
func (s *Sharder) lead(ctx context.Context, key string, sess *tenure.Session, task Task, hold func(context.Context)) error {
	e, err := tenure.New(s.cfg.electorConfig(KeyLease(s.cfg.Group, key), sess))
	if err != nil {
		return err
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- e.Run(lctx, func(ctx context.Context) error {
			s.setLeading(key, true)
			defer s.setLeading(key, false)
			return task(ctx, key)
		})
		stop()
	}()
	hold(lctx)
	s.handingOff(ctx, key)
	stop()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// awaitUnled reports whether key stays unled for rank × Takeover while v
// is the live set; false if v changed or ctx ended first.
func (s *Sharder) awaitUnled(ctx context.Context, key string, v *view, rank int) bool {
	octx, stop := context.WithCancel(ctx)
	defer stop()
	o := &tenure.Observer{Store: s.cfg.Store, Key: KeyLease(s.cfg.Group, key), Poll: s.cfg.TTL / 3,
		Clock: s.cfg.Clock, Logger: s.cfg.Logger}
	recs := o.Changes(octx)
	t := s.cfg.Clock.NewTimer(time.Duration(rank) * s.cfg.Takeover)
	t.Stop()
	defer t.Stop()
	var unled <-chan time.Time // armed while the key is unled
	for {
		select {
		case <-ctx.Done():
			return false
		case <-v.changed:
			return false
		case r, ok := <-recs:
			if !ok {
				return false
			}
			switch {
			case r.Held():
				t.Stop()
				unled = nil
			case unled == nil:
				t.Reset(time.Duration(rank) * s.cfg.Takeover)
				unled = t.C()
			}
		case <-unled:
			return true
		}
	}
}

// holdFallback returns when a fallback leader of key should give it up:
// when the live set changes from v, when Reclaim has passed, or when the
// key is led by another member (the owner got there first, so this member
// must not wait as a candidate and snatch the key at its next release).
func (s *Sharder) holdFallback(ctx context.Context, key string, v *view) {
	t := s.cfg.Clock.NewTimer(s.cfg.Reclaim)
	defer t.Stop()
	o := &tenure.Observer{Store: s.cfg.Store, Key: KeyLease(s.cfg.Group, key), Poll: s.cfg.TTL / 3,
		Clock: s.cfg.Clock, Logger: s.cfg.Logger}
	recs := o.Changes(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.changed:
			return
		case <-t.C():
			return
		case r, ok := <-recs:
			if !ok || r.Held() && r.Holder != s.cfg.Identity {
				return
			}
		}
	}
}
