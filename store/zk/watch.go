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

// Watch implements [tenure.Reader] with a ZooKeeper child watch on the
// key node (an existence watch until the node exists): acquisitions,
// releases and expiries all add or remove its lease child, which is
// ephemeral, so ZooKeeper announces every end of a grant. After each event
// the watch re-arms and wakes a [tenure.Follow] loop, which reads and
// delivers the record; since expiries are announced, a watch on a held key
// makes no reads while the holder renews. The channel is closed when ctx
// is done, the store is closed, a read fails, or the control session
// disconnects.
//
// Watch blocks until ZooKeeper has armed the watch and the record has been
// read after it (at most 5 s, or until ctx is done), so no change after the
// first record can be missed; it fails without a connected, authenticated
// control session.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
	// Arm, then read: a caller that goes on to Acquire cannot miss a
	// release.
	rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
	defer cancel()
	armed, down, err := s.arm(rctx, key)
	var r tenure.Record
	if err == nil {
		r, err = s.read(rctx, key)
	}
	if err != nil {
		return nil, s.fail(rctx, "watch", key, err)
	}
	wctx, stop := context.WithCancel(ctx)
	wake := make(chan struct{}, 1)
	go s.rearm(wctx, key, armed, down, wake)
	get := func(ctx context.Context) (tenure.Record, error) {
		rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
		defer cancel()
		return s.read(rctx, key)
	}
	out := make(chan tenure.Record)
	go func() {
		defer stop()
		tenure.Follow{
			Get:       get,
			Initial:   &r, // read above, after the watch was armed
			Wake:      wake,
			Done:      s.done, // the watch ends when the store closes
			Announced: true,   // lease nodes are ephemeral: ZooKeeper reports their end
		}.Run(wctx, out)
	}()
	return out, nil
}

// rearm waits for the armed ZooKeeper watch to fire, arms the next one and
// then wakes Follow, so the read Follow makes comes after the new watch is
// set and no change slips between. It closes wake, which ends the watch,
// when the control session disconnects or arming fails, and returns when
// ctx is done.
func (s *Store) rearm(ctx context.Context, key string, armed <-chan zk.Event, down <-chan struct{}, wake chan<- struct{}) {
	defer close(wake)
	for {
		select {
		case <-armed:
		case <-down:
			return
		case <-ctx.Done():
			return
		}
		rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
		var err error
		armed, down, err = s.arm(rctx, key)
		cancel()
		if err != nil {
			return
		}
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// arm sets a ZooKeeper watch on the key. It returns the armed watch and
// the channel that closes when the control session disconnects.
func (s *Store) arm(ctx context.Context, key string) (<-chan zk.Event, <-chan struct{}, error) {
	down, err := s.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	kp := s.keyPath(key)
	// A child watch sees grants end and begin; a data watch sees the key
	// node rewritten (from outside tenure: a grant's own write comes with
	// its child).
	armed, err := call(ctx, func() (<-chan zk.Event, error) {
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
			return ev, nil // the child watch is armed; the next one re-arms both
		}
		return either(ev, dev), nil
	})
	if err != nil {
		return nil, nil, err
	}
	return armed, down, nil
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
