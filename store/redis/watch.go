package redis

import (
	"context"
	"errors"
	"net"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxwait"
)

// healthInterval is how long a watch's connection may stay silent before
// the watch PINGs the server to check it is still there.
const healthInterval = 15 * time.Second

// Watch implements [tenure.Reader]. Each watch SUBSCRIBEs, on a
// connection of its own, to the key's event channel, where the acquire and
// release scripts publish, and to the keyspace channel of its lease key,
// where the server reports the key's expiry if keyspace notifications are
// on (see the package documentation). Each message wakes a [tenure.Follow]
// loop, which re-reads the record; whether or not keyspace notifications
// are on, Follow also re-reads when the server said the grant would expire.
//
// Watch blocks until the subscription is confirmed (bounded by ctx and the
// client's dial and read timeouts), so an unreachable server is reported
// here; the first delivery is then the current record. The channel is
// closed when ctx is done, the store is closed, a read fails, or the
// subscription connection is lost (messages may have been missed); the
// caller then reads with Get and watches again.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
	s.enableKeyspaceEvents(ctx)

	opt := s.client.Options()
	setup, cancel := context.WithTimeout(ctx, opt.DialTimeout+opt.ReadTimeout+opt.WriteTimeout)
	defer cancel()
	ps := s.client.Subscribe(setup)
	channels := []string{s.channel(key), s.keyspaceChannel(key)}
	err := s.call(setup, func() error {
		if err := ps.Subscribe(setup, channels...); err != nil {
			return err
		}
		for range channels {
			msg, err := ps.ReceiveTimeout(setup, opt.ReadTimeout)
			if err != nil {
				return err
			}
			if _, ok := msg.(*goredis.Subscription); !ok {
				return errors.New("unexpected reply to SUBSCRIBE")
			}
		}
		return nil
	})
	if err != nil {
		_ = ps.Close()
		return nil, s.fail(ctx, "subscribe", err)
	}

	s.closeMu.Lock()
	if s.closed.Load() {
		s.closeMu.Unlock()
		_ = ps.Close()
		return nil, tenure.ErrClosed
	}
	s.watches.Add(1)
	s.closeMu.Unlock()

	// The watch ends when ctx is done, the store closes (Close waits for
	// it) or the subscription dies (receive closes sig, which ends Follow).
	wctx, stop := context.WithCancel(ctx)
	sig := make(chan struct{}, 1)
	dead := make(chan struct{})
	go func() {
		defer close(dead)
		defer close(sig)
		receive(ps, sig)
	}()
	out := make(chan tenure.Record)
	go func() {
		defer s.watches.Done()
		defer func() { _ = ps.Close(); <-dead }()
		defer stop()
		ctxwait.CancelOnClose(wctx, s.done, stop)
		tenure.Follow{
			Get:  func(ctx context.Context) (tenure.Record, error) { return s.Get(ctx, key) },
			Wake: sig,
		}.Run(wctx, out)
	}()
	return out, nil
}

// receive turns messages on ps into signals until ps fails or is closed.
func receive(ps *goredis.PubSub, sig chan<- struct{}) {
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(context.Background(), healthInterval)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				// Silence: make the server say something.
				if ps.Ping(context.Background()) == nil {
					pinged = true
					continue
				}
			}
			return
		}
		pinged = false
		if m, ok := msg.(*goredis.Message); ok && m.Payload == "expire" {
			continue // a renewal's PEXPIRE: nothing changed hands
		}
		switch msg.(type) {
		case *goredis.Message, *goredis.Subscription:
			// A Subscription after the first ones means go-redis
			// reconnected: anything may have been missed, so re-read too.
			select {
			case sig <- struct{}{}:
			default:
			}
		}
	}
}

// enableKeyspaceEvents makes the server publish expiries of keys, their
// deletion and hash writes ("Kghx" in notify-keyspace-events: "x" for an
// expiry, "g" and "h" for a lease key deleted or rewritten by something
// other than tenure), adding to whatever is configured, once per store. A
// server that refuses (managed Redis often disables CONFIG) is not asked
// again: watches then learn of expiries by Follow's re-read at the
// grant's end.
func (s *Store) enableKeyspaceEvents(ctx context.Context) {
	if !s.keyspace {
		return
	}
	s.keyspaceMu.Lock()
	defer s.keyspaceMu.Unlock()
	if s.keyspaceDone {
		return
	}
	var cur map[string]string
	err := s.call(ctx, func() (err error) {
		cur, err = s.client.ConfigGet(ctx, "notify-keyspace-events").Result()
		return err
	})
	if err != nil {
		var rerr goredis.Error
		s.keyspaceDone = errors.As(err, &rerr) // refused, not unreachable
		return
	}
	flags := cur["notify-keyspace-events"]
	want := flags
	if !strings.Contains(want, "K") {
		want += "K"
	}
	for _, f := range []string{"g", "h", "x"} {
		if !strings.Contains(want, f) && !strings.Contains(want, "A") {
			want += f
		}
	}
	if want != flags {
		err = s.call(ctx, func() error {
			return s.client.ConfigSet(ctx, "notify-keyspace-events", want).Err()
		})
		if err != nil {
			var rerr goredis.Error
			if !errors.As(err, &rerr) {
				return
			}
		}
	}
	s.keyspaceDone = true
}
