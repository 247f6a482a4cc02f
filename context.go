package tenure

import (
	"context"
	"sync/atomic"
	"time"
)

type leaseKey struct{}

// leaderState is what a leader context carries: the lease and the task's
// progress mark.
type leaderState struct {
	lease    Lease
	clock    Clock
	base     time.Time    // when leadership began, on clock
	progress atomic.Int64 // time of the last Progress, as nanoseconds since base
}

// LeaseFrom returns the lease of the leader context ctx (or a context derived
// from it) and true, or false if ctx is not a leader context. Pass
// lease.Term with every write to the protected resource; see [Lease.Term].
func LeaseFrom(ctx context.Context) (Lease, bool) {
	st, ok := ctx.Value(leaseKey{}).(*leaderState)
	if !ok {
		return Lease{}, false
	}
	return st.lease, true
}

// Progress tells the elector that the leader task behind ctx is making
// progress. With [Config.StallTimeout] set, a task that does not call it at
// least that often is considered stalled and loses leadership. Calling it
// with a context that is not a leader context does nothing. It never blocks
// and is safe for concurrent use.
func Progress(ctx context.Context) {
	if st, ok := ctx.Value(leaseKey{}).(*leaderState); ok {
		st.progress.Store(int64(st.clock.Now().Sub(st.base)))
	}
}

func (st *leaderState) lastProgress() time.Time {
	return st.base.Add(time.Duration(st.progress.Load()))
}
