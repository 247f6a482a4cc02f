package azblob

import (
	"context"
	"time"

	"github.com/tenurehq/tenure"
)

// pollTimeout bounds one read of a watch, so a service that stopped
// answering closes the watch instead of stalling it.
const pollTimeout = 5 * time.Second

// Watch implements [tenure.Reader] by polling: Azure Blob Storage has no
// change notification a lease holder could use. A goroutine reads the blob's
// properties every poll interval ([Options.PollInterval], default 200 ms)
// and delivers the record at once, then whenever the holder or term
// changes, including when the service reports the lease expired or
// released. So a change is seen at most one poll interval (plus a request)
// after it happened, judged by the service, not by any client clock.
//
// Cost: one GetProperties request per poll interval per watch, for as long
// as the watch runs: 5 requests a second at the default (about 432,000 a
// day, billed as read operations). The elector watches only while it
// campaigns, not while it leads (the store is a [tenure.PollingWatcher]);
// an [tenure.Observer] or `tenure watch` watches all the time.
//
// The channel is closed when ctx is done, the store is closed, or a read
// fails or takes more than 5 s (the caller re-reads and watches again).
// Watch does not block.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, tenure.ErrClosed
	}
	s.watches.Add(1)
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.life, cancel)
	out := make(chan tenure.Record, 1)
	go func() {
		defer s.watches.Done()
		defer close(out)
		defer stop()
		defer cancel()
		name := blobName(s.prefix, key)
		tick := time.NewTicker(s.poll)
		defer tick.Stop()
		var last tenure.Record
		for first := true; ; first = false {
			rctx, cancel := context.WithTimeout(ctx, max(pollTimeout, 2*s.poll))
			st, err := s.props(rctx, name)
			cancel()
			if err != nil {
				return
			}
			if r := s.seen.Record(st.record(key)); first || r.Holder != last.Holder || r.Term != last.Term {
				select {
				case out <- r:
				case <-ctx.Done():
					return
				}
				last = r
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// WatchPolls implements [tenure.PollingWatcher]: Watch polls, so a leader
// relies on its renewals instead of keeping a watch open.
func (s *Store) WatchPolls() bool { return true }

var _ tenure.PollingWatcher = (*Store)(nil)
