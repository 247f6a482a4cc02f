package tenure

import (
	"context"
	"time"
)

// expiryMargin is added to a held record's Remaining before Follow re-reads
// it, so the read lands after the store's expiry rather than just before.
const expiryMargin = time.Millisecond

// Follow is the loop behind every [Reader.Watch]: a store supplies how to
// read the key and what tells it the key may have changed, and Follow does
// the rest the same way everywhere. It delivers the current record first,
// then one record per change of holder, term or value, and never a term
// older than one it delivered while that could be stale news: only once
// the store has shown older terms, and nothing newer, for the TTL of the
// last grant delivered (at most [DefaultTTL]) does it deliver the store's
// record again (a term written into the store from outside, a store
// restored from a backup), so that a watch never stops following the key
// for good. It re-reads the key:
//
//   - whenever Wake receives (a notification, an event the store cannot
//     decode into a record, a reconnection after which anything may have
//     been missed);
//   - when the last held record's Remaining has passed, so that a grant
//     that expires without being released is reported even by a store that
//     does not announce expiries;
//   - every Poll, if Poll is positive (a store that cannot be told of every
//     change);
//   - when older terms will have been shown for that TTL, to confirm them.
//
// Records decoded by the store itself (an etcd watch event) go through the
// same filter without a read.
//
// One rule decides when a watch ends: the channel is closed when ctx is
// done, when Done, Wake or Records is closed, or when Get fails. The caller then
// reads with Get and watches again, as the [Reader.Watch] contract says.
type Follow struct {
	// Get reads the key's current record. Required.
	Get func(ctx context.Context) (Record, error)
	// Initial, if set, is the first record, read by the store while it
	// set the watch up, so that Follow need not read it again.
	Initial *Record
	// Done, if set, ends the watch when it is closed: the store's own
	// end, such as its Close.
	Done <-chan struct{}
	// Wake receives when the record may have changed. May be nil.
	Wake <-chan struct{}
	// Records receives records the store decoded itself. May be nil.
	Records <-chan Record
	// Poll, if positive, is the longest time between two reads.
	Poll time.Duration
	// Announced says the store reports every expiry itself, through Wake or
	// Records (etcd deletes an expired lease's key, ZooKeeper its session's
	// node): Follow then does not re-read when a grant is due to end, so a
	// watch costs the store nothing while the holder renews.
	Announced bool
	// Clock defaults to [SystemClock].
	Clock Clock
}

// Start runs the loop in a goroutine of its own and returns its channel.
// It does not block; the first record is read in that goroutine.
func (f Follow) Start(ctx context.Context) <-chan Record {
	out := make(chan Record)
	go f.Run(ctx, out)
	return out
}

// Run runs the loop in the caller's goroutine, sending on out, and closes
// out when it returns. It blocks until the watch ends (see [Follow]).
func (f Follow) Run(ctx context.Context, out chan<- Record) {
	defer close(out)
	var d deliverer
	d.done = f.Done
	_ = f.follow(ctx, &d, out)
}

// deliverer is the filter every watch shares: it remembers what it last
// delivered so that it sends only changes, and never older news.
type deliverer struct {
	last Record
	sent bool
	// back is when records older than last were first seen, with nothing
	// as new as last since; zero when the latest record was not older.
	back time.Time
	done <-chan struct{} // Follow.Done
}

// backHold is how long records older than the last one delivered must be
// all the store shows before they are delivered: the last grant's TTL, at
// most DefaultTTL (DefaultTTL when the record says none). Every read of a
// key a live grant holds shows that grant's term, so older terms shown
// that long are no stale news but the store's state, and a TTL written
// from outside cannot stop a watch for longer.
func (d *deliverer) backHold() time.Duration {
	if d.last.TTL <= 0 {
		return DefaultTTL
	}
	return min(d.last.TTL, DefaultTTL)
}

// backDue reports when records older than the last one delivered will
// have been shown long enough to be delivered, if such records are being
// shown.
func (d *deliverer) backDue() (time.Time, bool) {
	return d.back.Add(d.backHold()), !d.back.IsZero()
}

// offer sends r, seen at now, on out if it changes the holder, term or
// value of what was last sent (or nothing was); a value changes within a
// term only where the store reports the holder before its value (raft).
// A record of an older term is sent only once older terms have been shown
// for backHold. It reports false if ctx ended first.
func (d *deliverer) offer(ctx context.Context, out chan<- Record, r Record, now time.Time) bool {
	if d.sent && r.Term < d.last.Term {
		if d.back.IsZero() {
			d.back = now
		}
		if now.Sub(d.back) < d.backHold() {
			return true // stale news, unless it lasts
		}
	} else {
		d.back = time.Time{}
	}
	if d.sent && r.Holder == d.last.Holder && r.Term == d.last.Term && r.Value == d.last.Value {
		return true
	}
	select {
	case out <- r:
		d.last, d.sent, d.back = r, true, time.Time{}
		return true
	case <-ctx.Done():
		return false
	case <-d.done:
		return false
	}
}

// follow is Run with the filter's state supplied by the caller, so that an
// [Observer] keeps it across watches, and without closing out. It returns
// when the watch ends: Get's error if that ended it, else nil.
func (f Follow) follow(ctx context.Context, d *deliverer, out chan<- Record) error {
	clock := f.Clock
	if clock == nil {
		clock = SystemClock
	}
	timer := clock.NewTimer(time.Hour)
	defer timer.Stop()
	read := f.Initial == nil
	var cur Record      // the latest record, delivered or not
	var curAt time.Time // when cur was read or received
	if !read {
		cur, curAt = *f.Initial, clock.Now()
	}
	for {
		if read {
			r, err := f.Get(ctx)
			if err != nil {
				return err
			}
			cur, curAt = r, clock.Now()
		}
		if !d.offer(ctx, out, cur, curAt) {
			return nil
		}
		var tick <-chan time.Time
		now := clock.Now()
		wait, ok := f.nextRead(cur, now.Sub(curAt))
		if due, back := d.backDue(); back {
			// Read again once older terms will have been shown for long
			// enough, even if nothing else prompts a read.
			if left := max(due.Sub(now)+expiryMargin, minWait); !ok || left < wait {
				wait, ok = left, true
			}
		}
		if ok {
			rearm(timer, wait) // moved later at each read: see rearm
			tick = timer.C()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-f.Done:
			return nil
		case _, open := <-f.Wake:
			if !open {
				return nil
			}
			read = true
		case r, open := <-f.Records:
			if !open {
				return nil
			}
			cur, curAt, read = r, clock.Now(), false
		case <-tick:
			read = true
		}
		timer.Stop()
	}
}

// nextRead is how long after now to re-read, given cur read age ago: when
// its grant is due to end, or at the next poll, whichever comes first.
// It reports false when only Wake or Records can prompt a read.
func (f Follow) nextRead(cur Record, age time.Duration) (time.Duration, bool) {
	wait, ok := f.Poll, f.Poll > 0
	if cur.Held() && cur.Remaining > 0 && !f.Announced {
		left := max(addSat(cur.Remaining, expiryMargin)-age, minWait)
		if !ok || left < wait {
			wait, ok = left, true
		}
	}
	return wait, ok
}
