package faultstore

import (
	"context"
	"time"

	"github.com/tenurehq/tenure"
)

// sessionPublisher is a Store around a store that is both a
// [tenure.Publisher] and a [tenure.SessionStore], keeping both abilities.
type sessionPublisher struct {
	*publisher
	inner tenure.SessionStore
}

var _ tenure.SessionStore = (*sessionPublisher)(nil)

// OpenSession implements [tenure.SessionStore], with the faults of
// Acquire. The session's calls go through the same faults: its Acquire
// as Acquire, its KeepAlive as Renew, its Release and Close as Release.
func (s *sessionPublisher) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	ss, err := callValue(ctx, s.faults, OpAcquire, func() (tenure.StoreSession, error) { return s.inner.OpenSession(ctx, ttl) })
	if err != nil {
		return nil, err
	}
	fs := &session{inner: ss, faults: s.faults}
	if ba, ok := ss.(tenure.BatchAcquirer); ok {
		return batchSession{fs, ba}, nil
	}
	return fs, nil
}

// batchSession is a session whose store session can acquire in batches,
// keeping that ability.
type batchSession struct {
	*session
	batch tenure.BatchAcquirer
}

// AcquireBatch implements [tenure.BatchAcquirer] with the faults of one
// Acquire for the whole batch: a fault fails every request in it (and may
// have let the store make the grants, as a lost reply does).
func (s batchSession) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	var res []tenure.AcquireResult
	err := s.faults.call(ctx, OpAcquire, func() error {
		res = s.batch.AcquireBatch(ctx, reqs)
		return nil
	})
	if err != nil {
		res = make([]tenure.AcquireResult, len(reqs))
		for i := range res {
			res[i].Err = err
		}
	}
	return res
}

type session struct {
	inner  tenure.StoreSession
	faults *Faults
}

func (s *session) Acquire(ctx context.Context, key, identity, value string) (tenure.Lease, error) {
	return callValue(ctx, s.faults, OpAcquire, func() (tenure.Lease, error) { return s.inner.Acquire(ctx, key, identity, value) })
}

func (s *session) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	return callValue(ctx, s.faults, OpRenew, func() ([]tenure.Lease, error) { return s.inner.KeepAlive(ctx) })
}

func (s *session) Release(ctx context.Context, l tenure.Lease) error {
	return s.faults.call(ctx, OpRelease, func() error { return s.inner.Release(ctx, l) })
}

func (s *session) Close(ctx context.Context) error {
	return s.faults.call(ctx, OpRelease, func() error { return s.inner.Close(ctx) })
}
