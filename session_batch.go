package tenure

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// batchMax bounds the requests of one [BatchAcquirer.AcquireBatch]. The
// session's MaxAcquires bounds them too: only that many wait at once.
const batchMax = 256

// batchCall is one Acquire waiting in a generation's batches.
type batchCall struct {
	req  AcquireRequest
	done chan batchResult // receives the result, once; buffered
	// Guarded by the generation's batches.mu:
	abandoned bool // the caller stopped waiting; a grant goes back
	delivered bool // the result is in done
}

// batchResult is a batch's answer to one call, and when the batch was sent.
type batchResult struct {
	AcquireResult
	sent time.Time
}

// batches gathers the Acquires of a generation's campaigns that wait at
// the same time, for a store session that can send them as one request.
// One batch is under way at a time; what arrives meanwhile makes the next
// batch: group commit, with no delay added to a lone Acquire.
type batches struct {
	mu      sync.Mutex
	pending []*batchCall
	running bool // a runner goroutine is sending batches
}

// acquire asks the store session for key, in a batch with the other
// Acquires waiting at the same time if the store session is a
// [BatchAcquirer], on its own otherwise, and returns the grant and when
// its request was sent. On its own, it first waits for one of the
// session's MaxAcquires slots. It blocks until the answer or ctx is done;
// a grant made for a caller that stopped waiting is given back in the
// background. Every request, batch or not, is bounded by the session's
// RequestTimeout from when it is sent: waiting for a slot or for the
// batch before is not request time.
func (g *generation) acquire(ctx context.Context, key, identity, value string) (Lease, time.Time, error) {
	ba, ok := g.ss.(BatchAcquirer)
	if !ok {
		return g.acquireOne(ctx, key, identity, value)
	}
	call := &batchCall{req: AcquireRequest{Key: key, Identity: identity, Value: value}, done: make(chan batchResult, 1)}
	b := &g.batches
	b.mu.Lock()
	b.pending = append(b.pending, call)
	start := !b.running
	b.running = true
	b.mu.Unlock()
	if start && !g.s.background(func(ctx context.Context) { g.runBatches(ctx, ba) }) {
		g.failPending(errSessionClosed)
	}
	select {
	case r := <-call.done:
		return r.Lease, r.sent, r.Err
	case <-ctx.Done():
	}
	b.mu.Lock()
	if call.delivered {
		b.mu.Unlock()
		r := <-call.done
		return r.Lease, r.sent, r.Err
	}
	call.abandoned = true
	b.mu.Unlock()
	return Lease{}, time.Time{}, fmt.Errorf("tenure: acquire of %q (in a batch): %w", key, context.Cause(ctx))
}

// acquireOne is acquire for a store session without batches.
func (g *generation) acquireOne(ctx context.Context, key, identity, value string) (Lease, time.Time, error) {
	free, err := g.s.acquireSlot(ctx)
	if err != nil {
		return Lease{}, time.Time{}, err
	}
	defer free()
	sent := g.s.cfg.Clock.Now()
	rctx, cancel := g.s.requestContext(ctx)
	defer cancel()
	l, err := g.ss.Acquire(rctx, key, identity, value)
	return l, sent, err
}

// runBatches sends the pending Acquires, a batch at a time, until none is
// left; ctx is the session's background context.
func (g *generation) runBatches(ctx context.Context, ba BatchAcquirer) {
	for {
		batch := g.nextBatch()
		if batch == nil {
			return
		}
		reqs := make([]AcquireRequest, len(batch))
		for i, c := range batch {
			reqs[i] = c.req
		}
		sent := g.s.cfg.Clock.Now()
		rctx, cancel := g.s.requestContext(ctx)
		res := ba.AcquireBatch(rctx, reqs)
		cancel()
		if len(res) != len(batch) {
			err := fmt.Errorf("tenure: the store answered %d of a batch of %d acquires: %w", len(res), len(batch), ErrUnavailable)
			res = make([]AcquireResult, len(batch))
			for i := range res {
				res[i].Err = err
			}
		}
		for i, c := range batch {
			g.deliver(c, batchResult{res[i], sent})
		}
	}
}

// nextBatch takes up to batchMax pending calls of distinct keys, callers
// that stopped waiting left out, or returns nil and marks the runner
// stopped if none is pending.
func (g *generation) nextBatch() []*batchCall {
	b := &g.batches
	b.mu.Lock()
	defer b.mu.Unlock()
	var batch, rest []*batchCall
	keys := map[string]bool{}
	for _, c := range b.pending {
		switch {
		case c.abandoned:
		case len(batch) < batchMax && !keys[c.req.Key]:
			keys[c.req.Key] = true
			batch = append(batch, c)
		default:
			rest = append(rest, c) // a key twice waits for the next batch
		}
	}
	b.pending = rest
	if len(batch) == 0 {
		b.running = false
		return nil
	}
	return batch
}

// deliver hands r to c's caller, or, if the caller stopped waiting, gives
// a grant back (unless an elector of the session was handed the very
// grant since: see claim).
func (g *generation) deliver(c *batchCall, r batchResult) {
	b := &g.batches
	b.mu.Lock()
	if !c.abandoned {
		c.delivered = true
		c.done <- r
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	if r.Err != nil || !g.claim(r.Lease) {
		return
	}
	g.s.background(func(ctx context.Context) {
		rctx, cancel := g.s.requestContext(ctx)
		defer cancel()
		_ = g.ss.Release(rctx, r.Lease)
	})
}

// failPending answers every pending call with err: no runner could start.
func (g *generation) failPending(err error) {
	b := &g.batches
	b.mu.Lock()
	pending := b.pending
	b.pending, b.running = nil, false
	b.mu.Unlock()
	for _, c := range pending {
		g.deliver(c, batchResult{AcquireResult: AcquireResult{Err: err}})
	}
}
