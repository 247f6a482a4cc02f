package redis

import (
	"context"
	"errors"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxwait"
)

// healthInterval is how long a watch's connection may stay silent before
// the watch PINGs the server to check it is still there.
const healthInterval = 15 * time.Second

// Watch implements [tenure.Reader]. Every watch of the Store SUBSCRIBEs
// on one shared connection (opened with the first watch, closed with the
// last) to the key's event channel, where the acquire and release scripts
// publish, and to the keyspace channel of its lease key, where the server
// reports the key's expiry if keyspace notifications are on (see the
// package documentation). Each message wakes a [tenure.Follow] loop, which
// re-reads the record; whether or not keyspace notifications are on,
// Follow also re-reads when the server said the grant would expire.
//
// Watch blocks until the subscription is confirmed (bounded by ctx and the
// client's dial and read timeouts), so an unreachable server is reported
// here; the first delivery is then the current record. The channel is
// closed when ctx is done, the store is closed, a read fails, or the
// shared subscription connection is lost (messages may have been missed):
// the caller then reads with Get and watches again.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
	s.enableKeyspaceEvents(ctx)

	opt := s.client.Options()
	setup, cancel := context.WithTimeout(ctx, opt.DialTimeout+opt.ReadTimeout+opt.WriteTimeout)
	defer cancel()
	w := &watcher{sig: make(chan struct{}, 1)}
	channels := []string{s.channel(key), s.keyspaceChannel(key)}
	if err := s.call(setup, func() error { return s.hub.add(setup, w, channels) }); err != nil {
		s.hub.remove(w, channels)
		return nil, s.fail(ctx, "subscribe", err)
	}

	s.closeMu.Lock()
	if s.closed.Load() {
		s.closeMu.Unlock()
		s.hub.remove(w, channels)
		return nil, tenure.ErrClosed
	}
	s.watches.Add(1)
	s.closeMu.Unlock()

	// The watch ends when ctx is done, the store closes (Close waits for
	// it) or the subscription dies (the hub closes w.sig, which ends
	// Follow).
	wctx, stop := context.WithCancel(ctx)
	out := make(chan tenure.Record)
	go func() {
		defer s.watches.Done()
		defer s.hub.remove(w, channels)
		defer stop()
		ctxwait.CancelOnClose(wctx, s.done, stop)
		tenure.Follow{
			Get:  func(ctx context.Context) (tenure.Record, error) { return s.Get(ctx, key) },
			Wake: w.sig,
		}.Run(wctx, out)
	}()
	return out, nil
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
