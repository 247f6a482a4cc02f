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

// Watch implements [tenure.Watcher] with a ZooKeeper child watch on the
// key node (an existence watch until the node exists): acquisitions,
// releases and expiries all add or remove its lease child. After each event
// the watch reads and delivers the record; as a safety net it also re-reads
// a held key once its Remaining has passed. The channel is closed when ctx
// is done, the store is closed, a read fails, or the control session
// disconnects.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	out := make(chan tenure.Record)
	go s.watch(ctx, key, out)
	return out, nil
}

func (s *Store) watch(ctx context.Context, key string, out chan<- tenure.Record) {
	defer close(out)
	kp := s.keyPath(key)
	var (
		last  tenure.Record
		first = true
		armed <-chan zk.Event // the pending ZooKeeper watch, nil once it fired
	)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
		down, err := s.session(rctx)
		if err == nil && armed == nil {
			// Set the watch before reading, so no change slips between.
			armed, err = call(rctx, func() (<-chan zk.Event, error) {
				_, _, ev, err := s.ctl.ChildrenW(kp)
				if errors.Is(err, zk.ErrNoNode) {
					_, _, ev, err = s.ctl.ExistsW(kp)
				}
				return ev, err
			})
		}
		var r tenure.Record
		if err == nil {
			r, err = s.read(rctx, key)
		}
		cancel()
		if err != nil {
			return
		}
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
	}
}
