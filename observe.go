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
	// Store is where the observer reads: any [Store], or a [Reader] that
	// cannot grant, such as a peer-mode observer.
	Store Reader
	Key   string
	// Poll is how often to read the key while no watch can be set up, and
	// the retry period after errors. Default 1s.
	Poll time.Duration
	// Clock defaults to [SystemClock]; Logger to [slog.Default].
	Clock  Clock
	Logger *slog.Logger
}

// Current returns who leads now: the key's record, with an empty Holder
// when nobody does. It is [Reader.Get] under a name that says what it is
// for.
func (o *Observer) Current(ctx context.Context) (Record, error) {
	if err := CheckKey(o.Key); err != nil {
		return Record{}, err
	}
	return o.Store.Get(ctx, o.Key)
}

// Changes returns a channel that receives the current record, then one
// record for every change of holder or term that the observer sees,
// including the change to "nobody leads" when a holder's grant expires
// without being released (a crashed or stalled leader). It follows the
// store's watch, and polls every Poll while no watch can be set up; very
// short terms between two polls can be missed, never reported out of
// order. A term older than one delivered is stale news and is not
// delivered, unless the store shows nothing newer for the TTL of the last
// record delivered (at most [DefaultTTL]): a term written into the store
// from outside, or a store restored from a backup, then delays the
// changes that follow (by up to twice that, the store's watch and the
// observer each waiting it out) but does not stop them (see [Follow]).
// Store errors are logged and retried. The channel is closed when ctx is
// done. Changes does not block.
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
	get := func(ctx context.Context) (Record, error) { return o.Store.Get(ctx, o.Key) }
	warn := func(msg string, err error) {
		if err != nil && ctx.Err() == nil {
			logger.Warn(msg, "key", o.Key, "err", err)
		}
	}
	var d deliverer // shared by every watch: no stale news
	for ctx.Err() == nil {
		ch, stopWatch, err := watchWithin(ctx, clock, o.Store, o.Key, poll)
		warn("tenure: observer cannot watch; polling", err)
		if err == nil {
			// Announced: a Reader's watch delivers a grant's expiry itself
			// (its contract, which storetest checks of every store), so
			// this loop need not re-read when the holder's TTL runs out;
			// it would, about once per TTL, while the holder renews.
			warn("tenure: observer cannot read the key", Follow{Get: get, Records: ch, Clock: clock, Announced: true}.follow(ctx, &d, out))
			stopWatch()
		}
		// Between two watches, or after a failed read: read now and at the
		// holder's expiry, for one Poll.
		pctx, stop := withDeadline(ctx, clock, clock.Now().Add(poll), context.DeadlineExceeded)
		warn("tenure: observer cannot read the key", Follow{Get: get, Clock: clock}.follow(pctx, &d, out))
		<-pctx.Done()
		stop()
	}
}
