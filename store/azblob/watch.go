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
// change notification a lease holder could use. A [tenure.Follow] loop
// with Poll set to the poll interval ([Options.PollInterval], default
// 200 ms) reads the blob's properties a poll interval after each read and
// delivers the record at once, then whenever the holder or term changes,
// including when the service reports the lease expired or released. So a
// change is seen at most one poll interval (plus a request) after it
// happened, judged by the service, not by any client clock.
//
// Cost: at most one GetProperties request per poll interval per watch, for as long
// as the watch runs: 5 requests a second at the default (about 432,000 a
// day, billed as read operations). The elector watches only while it
// campaigns, not while it leads (the store is a [tenure.PollingWatcher]);
// an [tenure.Observer] or `tenure watch` watches all the time.
//
// The channel is closed when ctx is done, the store is closed, or a read
// fails or takes more than 5 s (the caller re-reads and watches again).
// Watch does not block.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
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
	stop := context.AfterFunc(s.life, cancel) // the watch ends when the store closes
	name := blobName(s.prefix, key)
	get := func(ctx context.Context) (tenure.Record, error) {
		rctx, cancel := context.WithTimeout(ctx, max(pollTimeout, 2*s.poll))
		defer cancel()
		st, err := s.props(rctx, key, name)
		if err != nil {
			return tenure.Record{}, err
		}
		return s.seen.Record(st.record(key)), nil
	}
	out := make(chan tenure.Record)
	go func() {
		defer s.watches.Done()
		defer stop()
		defer cancel()
		tenure.Follow{Get: get, Poll: s.poll}.Run(ctx, out)
	}()
	return out, nil
}

// WatchPolls implements [tenure.PollingWatcher]: Watch polls, so a leader
// relies on its renewals instead of keeping a watch open.
func (s *Store) WatchPolls() bool { return true }

var _ tenure.PollingWatcher = (*Store)(nil)
