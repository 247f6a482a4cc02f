package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
)

// watchReadTimeout bounds the read a watch makes when it is set up.
const watchReadTimeout = 5 * time.Second

// Watch implements [tenure.Reader] with an etcd watch on the key's holder
// key: every acquisition, release and expiry (etcd deletes the key when the
// lease ends) is an event, and the record is built from the event itself
// (with the previous value for a deletion), so a delivery costs etcd no
// read. A record delivered for an acquisition has the granted TTL as its
// Remaining. The records go through [tenure.Follow] as announced ones:
// etcd reports every expiry, so a watch on a held key costs etcd nothing
// while the holder renews. The channel is closed when ctx is done, the
// store is closed, or etcd cancels the watch (for instance when the member
// loses its raft leader).
//
// Watch blocks until it has read the record and etcd has created a watch
// from the revision of that read (at most 5 s, or until ctx is done), so
// no change after the first record can be missed; it fails if etcd cannot
// be reached.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
	// Read, then watch from the next revision: a caller that goes on to
	// Acquire cannot miss a release.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	rctx, rcancel := context.WithTimeout(wctx, watchReadTimeout)
	defer rcancel()
	r, rev, err := s.read(rctx, key)
	if err != nil {
		cancel()
		return nil, s.fail(rctx, "watch", key, err)
	}
	// Client.Watch returns once etcd created the watch, or wctx ends.
	created := make(chan clientv3.WatchChan, 1)
	go func() { created <- s.c.Watch(wctx, s.holderKey(key), clientv3.WithRev(rev+1), clientv3.WithPrevKV()) }()
	var events clientv3.WatchChan
	select {
	case events = <-created:
	case <-rctx.Done():
		cancel()
		return nil, s.fail(rctx, "watch", key, rctx.Err())
	}
	out := make(chan tenure.Record)
	r = s.seen.Record(r)
	go func() {
		defer cancel()
		records := make(chan tenure.Record)
		go s.decode(wctx, key, r, events, records)
		tenure.Follow{
			// Follow reads only if the stream ends without closing: every
			// change comes as an event.
			Get: func(ctx context.Context) (tenure.Record, error) {
				r, _, err := s.read(ctx, key)
				return s.seen.Record(r), err
			},
			Initial:   &r, // read above: a watch costs etcd no second read
			Records:   records,
			Done:      s.bg.Done(), // the watch ends when the store closes
			Announced: true,        // etcd deletes the holder key when its lease ends
		}.Run(wctx, out)
	}()
	return out, nil
}

// decode sends the key's record after each batch of watch events on
// records, built from the events themselves, and closes records when the
// etcd watch ends (closed, failed or cancelled) or ctx is done. before is
// the record the first event applies to.
func (s *Store) decode(ctx context.Context, key string, before tenure.Record, events clientv3.WatchChan, records chan<- tenure.Record) {
	defer close(records)
	for {
		select {
		case resp, open := <-events:
			if !open || resp.Err() != nil || resp.Canceled {
				return
			}
			if len(resp.Events) == 0 {
				continue
			}
			for _, ev := range resp.Events {
				before = s.seen.Record(eventRecord(key, ev, before))
			}
			select {
			case records <- before:
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// eventRecord is the key's record after ev, given the record before it.
func eventRecord(key string, ev *clientv3.Event, before tenure.Record) tenure.Record {
	if ev.Type == clientv3.EventTypePut {
		return heldRecord(key, ev.Kv, nil)
	}
	r := tenure.Record{Key: key, Term: before.Term}
	if ev.PrevKv != nil {
		r.Term = uint64(ev.PrevKv.CreateRevision)
	}
	return r
}
