package promtenure

import (
	"context"
	"errors"
	"time"

	"github.com/tenurehq/tenure"
)

// Store returns s instrumented for c's key: every Acquire of the key counts
// an attempt (and a failure, held or error, when it grants nothing), and
// every successful Renew of the key observes its round trip in
// tenure_renew_latency_seconds. Give the result to [tenure.Config.Store];
// the elector has no per-attempt events, so without it the acquisition
// and latency metrics stay at zero. Calls are passed through unchanged and
// add no blocking. The wrapper forwards the optional abilities the root
// package defines ([tenure.Defaulter], [tenure.TTLRanger],
// [tenure.PollingWatcher]), answering "no preference" where s lacks one.
func (c *Collector) Store(s tenure.Store) tenure.Store { return &store{Store: s, c: c} }

type store struct {
	tenure.Store
	c *Collector
}

var (
	_ tenure.Defaulter      = (*store)(nil)
	_ tenure.TTLRanger      = (*store)(nil)
	_ tenure.PollingWatcher = (*store)(nil)
)

func (s *store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	l, err := s.Store.Acquire(ctx, key, identity, ttl)
	if key == s.c.key {
		s.c.attempts.Inc()
		switch {
		case errors.Is(err, tenure.ErrHeld):
			s.c.acquireFailures.WithLabelValues(FailureHeld).Inc()
		case err != nil:
			s.c.acquireFailures.WithLabelValues(FailureError).Inc()
		}
	}
	return l, err
}

func (s *store) Renew(ctx context.Context, l tenure.Lease) error {
	start := time.Now()
	err := s.Store.Renew(ctx, l)
	if err == nil && l.Key == s.c.key {
		s.c.observeRenew(time.Since(start))
	}
	return err
}

func (s *store) Defaults() (string, time.Duration) {
	if d, ok := s.Store.(tenure.Defaulter); ok {
		return d.Defaults()
	}
	return "", 0
}

func (s *store) TTLRange() (time.Duration, time.Duration) {
	if r, ok := s.Store.(tenure.TTLRanger); ok {
		return r.TTLRange()
	}
	return 0, 0
}

func (s *store) WatchPolls() bool {
	p, ok := s.Store.(tenure.PollingWatcher)
	return ok && p.WatchPolls()
}
