package compare

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenurehq/tenure"
)

// errCrashed is what a crashed tenure candidate's store calls return.
var errCrashed = errors.New("compare: candidate crashed (simulated)")

// tenureContender runs tenure electors, each on a store handle of its own.
type tenureContender struct {
	ttl time.Duration
	// open returns a new store handle for one candidate and whether the
	// candidate owns it (closes it when stopped).
	open func(ctx context.Context) (st tenure.Store, owned bool, err error)
	// calls, if set, counts every store call of every candidate: the
	// request count of a store that has no server (the memory store).
	calls *atomic.Int64
}

func (c *tenureContender) Start(ctx context.Context, key, id string, onLead func()) (candidate, error) {
	st, owned, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	w := &crashable{Store: st, calls: c.calls}
	e, err := tenure.New(tenure.Config{
		Store:    w,
		Key:      key,
		Identity: id,
		TTL:      c.ttl, // every other setting: tenure's defaults for this TTL
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		if owned {
			st.Close()
		}
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	tc := &tenureCandidate{w: w, owned: owned, cancel: cancel, release: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tc.done)
		_ = e.Do(runCtx, func(lctx context.Context) error {
			onLead()
			select {
			case <-tc.release:
			case <-lctx.Done():
			}
			return nil
		})
	}()
	return tc, nil
}

type tenureCandidate struct {
	w       *crashable
	owned   bool
	cancel  context.CancelFunc
	once    sync.Once
	release chan struct{}
	done    chan struct{}
}

// Release makes the leader task return; Do then releases the lease.
func (c *tenureCandidate) Release() { c.once.Do(func() { close(c.release) }) }

// Crash cuts the candidate off its store, then stops it: its renewals and
// its final release fail, so the lease is left to expire.
func (c *tenureCandidate) Crash() {
	c.w.crashed.Store(true)
	c.cancel()
}

func (c *tenureCandidate) Stop() {
	c.cancel()
	<-c.done
	if c.owned {
		_ = c.w.Store.Close()
	}
}

// crashable passes calls to a store until crashed, then fails them all at
// once, as calls from a dead process never arrive. It counts calls if
// calls is set. It always offers Watch; every store here can watch.
type crashable struct {
	tenure.Store
	crashed atomic.Bool
	calls   *atomic.Int64
}

var (
	_ tenure.Store = (*crashable)(nil)
)

func (c *crashable) call() error {
	if c.crashed.Load() {
		return errCrashed
	}
	if c.calls != nil {
		c.calls.Add(1)
	}
	return nil
}

func (c *crashable) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	if err := c.call(); err != nil {
		return tenure.Lease{}, err
	}
	return c.Store.Acquire(ctx, key, identity, ttl)
}

func (c *crashable) Renew(ctx context.Context, l tenure.Lease) error {
	if err := c.call(); err != nil {
		return err
	}
	return c.Store.Renew(ctx, l)
}

func (c *crashable) Release(ctx context.Context, l tenure.Lease) error {
	if err := c.call(); err != nil {
		return err
	}
	return c.Store.Release(ctx, l)
}

func (c *crashable) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := c.call(); err != nil {
		return tenure.Record{}, err
	}
	return c.Store.Get(ctx, key)
}

func (c *crashable) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := c.call(); err != nil {
		return nil, err
	}
	return c.Store.Watch(ctx, key)
}
