package etcd

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
)

// watchReadTimeout bounds each read a watch makes after an event.
const watchReadTimeout = 5 * time.Second

// expirySlack is how long after a holder's reported Remaining a watch
// re-reads the key if etcd sent no event, in case the expiry event was
// missed.
const expirySlack = 100 * time.Millisecond

// Watch implements [tenure.Watcher] with an etcd watch on the key's holder
// key: every acquisition, release and expiry (etcd deletes the key when the
// lease ends) is an event, after which the watch reads and delivers the
// record. As a safety net it also re-reads a held key once its Remaining
// has passed. The channel is closed when ctx is done, the store is closed,
// a read fails, or etcd cancels the watch (for instance when the member
// loses its raft leader).
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
	go func() { created <- s.c.Watch(wctx, s.holderKey(key), clientv3.WithRev(rev+1)) }()
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
	read := func() (tenure.Record, bool) {
		rctx, rcancel := context.WithTimeout(ctx, watchReadTimeout)
		defer rcancel()
		r, _, err := s.read(rctx, key)
		return r, err == nil
	}
	var last tenure.Record
	first, ok := true, true
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if first || r.Holder != last.Holder || r.Term != last.Term {
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
			last, first = r, false
		}
		timer.Stop()
		if r.Held() {
			timer.Reset(r.Remaining + expirySlack)
		}
		select {
		case resp, open := <-events:
			if !open || resp.Err() != nil || resp.Canceled {
				return
			}
			if len(resp.Events) == 0 {
				continue // a progress notification: nothing changed
			}
		case <-timer.C:
		case <-ctx.Done():
			return
		}
		if r, ok = read(); !ok {
			return
		}
	}
}
