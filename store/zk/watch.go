package zk

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
)

// watchReadTimeout bounds each read a watch makes.
const watchReadTimeout = 5 * time.Second

// expirySlack is how long after a holder's Remaining a watch re-reads the
// key if ZooKeeper sent no event.
const expirySlack = 100 * time.Millisecond

// Watch implements [tenure.Reader] with a ZooKeeper child watch on the
// key node (an existence watch until the node exists): acquisitions,
// releases and expiries all add or remove its lease child. After each event
// the watch reads and delivers the record; as a safety net it also re-reads
// a held key once its Remaining has passed. The channel is closed when ctx
// is done, the store is closed, a read fails, or the control session
// disconnects.
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
	// Set up before returning: once Watch returns, ZooKeeper watches the
	// key, so a caller that goes on to Acquire cannot miss a release.
	rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
	defer cancel()
	armed, down, r, err := s.watchStep(rctx, key, nil)
	if err != nil {
		return nil, s.fail(rctx, "watch", key, err)
	}
	out := make(chan tenure.Record)
	go s.watch(ctx, key, armed, down, r, out)
	return out, nil
}

// watchStep sets a ZooKeeper watch on the key unless one is armed, then
// reads the record. It returns the armed watch and the channel that closes
// when the control session disconnects.
func (s *Store) watchStep(ctx context.Context, key string, armed <-chan zk.Event) (<-chan zk.Event, <-chan struct{}, tenure.Record, error) {
	down, err := s.session(ctx)
	if err != nil {
		return nil, nil, tenure.Record{}, err
	}
	if armed == nil {
		// Set the watch before reading, so no change slips between.
		kp := s.keyPath(key)
		// A child watch sees grants end and begin; a data watch sees the
		// key node rewritten (from outside tenure: a grant's own write
		// comes with its child).
		armed, err = call(ctx, func() (<-chan zk.Event, error) {
			_, _, ev, err := s.ctl.ChildrenW(kp)
			if errors.Is(err, zk.ErrNoNode) {
				_, _, ev, err = s.ctl.ExistsW(kp)
				return ev, err
			}
			if err != nil {
				return nil, err
			}
			_, _, dev, err := s.ctl.GetW(kp)
			if err != nil {
				return ev, nil // the child watch is armed; the next step re-arms both
			}
			return either(ev, dev), nil
		})
		if err != nil {
			return nil, nil, tenure.Record{}, err
		}
	}
	r, err := s.read(ctx, key)
	return armed, down, r, err
}

func (s *Store) watch(ctx context.Context, key string, armed <-chan zk.Event, down <-chan struct{}, r tenure.Record, out chan<- tenure.Record) {
	defer close(out)
	var last tenure.Record
	first := true
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		if first || r.Holder != last.Holder || r.Term != last.Term {
			select {
			case out <- r:
			case <-ctx.Done():
				return
			case <-s.done:
				return
			}
			last, first = r, false
		}
		timer.Stop()
		if r.Held() {
			timer.Reset(r.Remaining + expirySlack)
		}
		select {
		case <-armed:
			armed = nil
		case <-timer.C:
		case <-down:
			return
		case <-ctx.Done():
			return
		case <-s.done:
			return
		}
		rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
		var err error
		armed, down, r, err = s.watchStep(rctx, key, armed)
		cancel()
		if err != nil {
			return
		}
	}
}

// either returns a channel that receives the first event of a or b. The
// other watch stays registered until it fires; its event is dropped.
func either(a, b <-chan zk.Event) <-chan zk.Event {
	out := make(chan zk.Event, 1)
	go func() {
		select {
		case ev := <-a:
			out <- ev
		case ev := <-b:
			out <- ev
		}
	}()
	return out
}
