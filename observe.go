package tenure

import (
	"context"
	"fmt"
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
// for. Without a Store, or with a key no store accepts ([CheckKey]), it
// returns an error wrapping [ErrInvalid].
func (o *Observer) Current(ctx context.Context) (Record, error) {
	if err := o.check(); err != nil {
		return Record{}, err
	}
	if err := checkContext(ctx, "Observer.Current"); err != nil {
		return Record{}, err
	}
	return o.Store.Get(ctx, o.Key)
}

// check reports why o cannot work, if it cannot.
func (o *Observer) check() error {
	if o.Store == nil {
		return invalidf("Observer.Store is nil")
	}
	if err := CheckKey(o.Key); err != nil {
		return fmt.Errorf("Observer.Key: %w", err)
	}
	return nil
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
// Store errors are logged and retried; one that keeps coming back (the
// store down) is logged at once, then at most once per minute with the
// number of repeats left out, until the operation succeeds again. The
// channel is closed when ctx is
// done, and at once, with the reason logged as an error, for an observer
// that cannot work (see [Observer.Current]) or a nil ctx. Changes does not
// block.
func (o *Observer) Changes(ctx context.Context) <-chan Record {
	out := make(chan Record)
	err := o.check()
	if err == nil {
		err = checkContext(ctx, "Observer.Changes")
	}
	if err != nil {
		logger := o.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Error("tenure: observer cannot follow the key", "key", o.Key, "err", err)
		close(out)
		return out
	}
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
	var warns warnLimiter
	warn := func(msg string, err error) {
		if ctx.Err() == nil {
			warns.report(logger, clock.Now(), msg, o.Key, err)
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

// observerWarnEvery is how often an [Observer] logs a failure that keeps
// coming back. It polls every second while the store is down, which logged
// two lines a second (a watch and a read failing) for as long as it was.
const observerWarnEvery = time.Minute

// warnLimiter logs an observer's failures, each message's first at once and
// then at most one per observerWarnEvery, with the count of those left out
// ("repeated"). A success of the operation a message is about forgets it,
// so that its next failure is logged at once. Not safe for concurrent use.
type warnLimiter struct {
	last    map[string]time.Time // when each message was last logged
	skipped map[string]int       // repeats of it left out since
}

// report logs err, a failure of the operation msg is about, if it is
// due, or forgets msg if err is nil.
func (l *warnLimiter) report(logger *slog.Logger, now time.Time, msg, key string, err error) {
	if err == nil {
		delete(l.last, msg)
		delete(l.skipped, msg)
		return
	}
	if l.last == nil {
		l.last, l.skipped = make(map[string]time.Time), make(map[string]int)
	}
	if at, ok := l.last[msg]; ok && now.Sub(at) < observerWarnEvery {
		l.skipped[msg]++
		return
	}
	attrs := []any{"key", key, "err", err}
	if n := l.skipped[msg]; n > 0 {
		attrs = append(attrs, "repeated", n)
	}
	logger.Warn(msg, attrs...)
	l.last[msg], l.skipped[msg] = now, 0
}
