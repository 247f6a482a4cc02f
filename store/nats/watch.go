package nats

import (
	"context"
	"fmt"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
)

// Watch implements [tenure.Reader] with a JetStream key-value watch on
// the key's NATS key: every message written there (a grant, a renewal, a
// release, the server's marker of an expired grant, a delete or purge
// from outside) wakes [tenure.Follow], which reads the key once. Expiries
// are announced by the server's marker; a watch also reads the key when
// a held record's Remaining has passed, for a grant written from outside
// without a TTL, which ends by observation only. The channel is closed when ctx is done, the store is closed, or
// the watch ends; the caller then reads and watches again.
//
// Watch blocks until the watch is set up on the server (or ctx is done),
// so that a change right after it returns is delivered.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := ctxerr.Call(ctx, s.closed.Load(), key); err != nil {
		return nil, err
	}
	setup, done := s.link.bound(ctx)
	defer done()
	kv, _, err := s.usable(setup)
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.bg, cancel) // Close ends the watch
	w, err := kv.Watch(wctx, s.NATSKey(key), jetstream.MetaOnly(), jetstream.UpdatesOnly())
	if err != nil {
		err = s.fail(wctx, fmt.Sprintf("watch %q", key), err)
		stop()
		cancel()
		return nil, err
	}
	wake := make(chan struct{}, 1)
	// A watch whose connection is lost may have missed writes: it ends,
	// and its caller reads and watches again.
	lost := s.nc.StatusChanged(natsgo.DISCONNECTED, natsgo.RECONNECTING, natsgo.CLOSED)
	if !s.nc.IsConnected() {
		s.nc.RemoveStatusListener(lost)
		stop()
		cancel()
		_ = w.Stop()
		return nil, s.fail(ctx, fmt.Sprintf("watch %q", key), natsgo.ErrConnectionClosed)
	}
	go func() {
		defer cancel()
		defer s.nc.RemoveStatusListener(lost)
		defer close(wake)
		defer func() { _ = w.Stop() }()
		defer stop()
		for {
			select {
			case _, open := <-w.Updates():
				if !open {
					return
				}
				select {
				case wake <- struct{}{}:
				default: // a read is due anyway
				}
			case <-lost:
				return
			case <-wctx.Done():
				return
			}
		}
	}()
	return tenure.Follow{
		Get:  func(ctx context.Context) (tenure.Record, error) { return s.Get(ctx, key) },
		Done: s.bg.Done(),
		Wake: wake,
		// Not Announced: a grant written from outside without a TTL ends
		// by observation, which no message announces. A renewal comes
		// before the Remaining of the record it replaces runs out, so
		// this costs no reads while the holder renews.
	}.Start(wctx), nil
}
