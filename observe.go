package tenure

import (
	"context"
	"log/slog"
	"time"
)

// Observer follows who leads a key without campaigning, for followers that
// route work to the leader and for the `tenure watch` command. The zero
// value is not usable: set Store and Key.
type Observer struct {
	Store Store
	Key   string
	// Poll is the polling period for stores that cannot watch, and the
	// retry period after errors. Default 1s.
	Poll time.Duration
	// Clock defaults to [SystemClock]; Logger to [slog.Default].
	Clock  Clock
	Logger *slog.Logger
}

// Leader returns who leads now: the key's record, with an empty Holder when
// nobody does. It is [Store.Get] under a name that says what it is for.
func (o *Observer) Leader(ctx context.Context) (Record, error) {
	if err := CheckKey(o.Key); err != nil {
		return Record{}, err
	}
	return o.Store.Get(ctx, o.Key)
}

// Changes returns a channel that receives the current record, then one
// record for every change of holder or term that the observer sees,
// including the change to "nobody leads" when a holder's grant expires
// without being released (a crashed or stalled leader). It uses the store's
// watch where there is one and polls otherwise; very short terms between two
// polls can be missed, never reported out of order. Store errors are logged
// and retried. The channel is closed when ctx is done. Changes does not block.
func (o *Observer) Changes(ctx context.Context) <-chan Record {
	out := make(chan Record)
	go o.run(ctx, out)
	return out
}

func (o *Observer) run(ctx context.Context, out chan<- Record) {
	defer close(out)
	clock, logger, poll := o.Clock, o.Logger, o.Poll
	if clock == nil {
		clock = SystemClock
	}
	if logger == nil {
		logger = slog.Default()
	}
	if poll <= 0 {
		poll = time.Second
	}
	watcher, canWatch := o.Store.(Watcher)
	var watch <-chan Record
	stopWatch := func() {}
	defer func() { stopWatch() }()
	var last Record
	var rewatchAt time.Time // after a watch ended, wait a poll before the next
	sent := false
	for ctx.Err() == nil {
		if canWatch && watch == nil && !clock.Now().Before(rewatchAt) {
			stopWatch()
			var err error
			if watch, stopWatch, err = watchWithin(ctx, clock, watcher, o.Key, poll); err != nil {
				if ctx.Err() == nil {
					logger.Warn("tenure: observer cannot watch; polling", "key", o.Key, "err", err)
				}
				rewatchAt = clock.Now().Add(poll)
			}
		}
		r, err := o.Store.Get(ctx, o.Key)
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("tenure: observer cannot read the key", "key", o.Key, "err", err)
			}
			sleep(ctx, clock, poll)
			continue
		}
		if sent && r.Term < last.Term {
			r = last // older news than what was delivered: terms never go back
		}
	follow:
		for {
			if !sent || r.Holder != last.Holder || r.Term != last.Term {
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
				last, sent = r, true
			}
			// Wait for a watch delivery, the holder's expiry, or the poll.
			wait := poll
			if watch != nil {
				wait = time.Hour
			}
			if r.Held() && r.Remaining > 0 {
				wait = min(wait, addSat(r.Remaining, minWait))
			}
			t := clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case nr, open := <-watch:
				t.Stop()
				if !open {
					watch, rewatchAt = nil, clock.Now().Add(poll)
					break follow // re-read with Get and watch again
				}
				if nr.Term < last.Term {
					// Older news: a watch's first delivery, read when it
					// was set up, can arrive after a Get that saw a later
					// term.
					continue
				}
				r = nr
			case <-t.C():
				break follow // re-read with Get
			}
		}
	}
}
