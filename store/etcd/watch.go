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
// Remaining. The channel is closed when ctx is done, the store is closed,
// or etcd cancels the watch (for instance when the member loses its raft
// leader).
//
// Watch blocks until the watch is set up and the first record read (at
// most 5 s, or until ctx is done), so that a release right after it returns
// is delivered; it fails if the store cannot be reached.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	// Set up before returning: once Watch returns, etcd watches the key,
	// so a caller that goes on to Acquire cannot miss a release.
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
	go s.watch(wctx, cancel, key, r, events, out)
	return out, nil
}

func (s *Store) watch(ctx context.Context, cancel context.CancelFunc, key string, r tenure.Record, events clientv3.WatchChan, out chan<- tenure.Record) {
	defer close(out)
	defer cancel()
	go func() { // end the watch when the store closes
		select {
		case <-s.bg.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	var last tenure.Record
	first := true
	for {
		r = s.seen.Record(r)
		if first || r.Holder != last.Holder || r.Term != last.Term {
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
			last, first = r, false
		}
		select {
		case resp, open := <-events:
			if !open || resp.Err() != nil || resp.Canceled {
				return
			}
			for _, ev := range resp.Events {
				r = eventRecord(key, ev, r)
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
