package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure"
)

var _ tenure.BatchAcquirer = (*session)(nil)

// AcquireBatch implements [tenure.BatchAcquirer]: the acquire statement
// of [session.Acquire] once per request, all sent at once on one
// connection and run in one implicit transaction (one round trip, one
// commit), in key order so that two batches over the same keys wait for
// each other's row locks rather than deadlock. A held key's record is
// read afterwards, as Acquire reads it. A batch that fails because a
// key's next term does not fit the column (its term was set to the largest
// bigint from outside) is rolled back as a whole; each of its requests is
// then sent alone, as by Acquire, so that only that key fails, with an
// error matching [tenure.ErrTermsExhausted].
func (ss *session) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	res := make([]tenure.AcquireResult, len(reqs))
	sent := time.Now()
	var todo []acquired
	idx := map[string]int{} // key → its request's index
	live := ss.check(ctx)   // as Acquire, after a request's own checks
	for i, r := range reqs {
		err := tenure.CheckClaim(r.Key, tenure.Claim{Identity: r.Identity, TTL: ss.ttl, Value: r.Value})
		if err == nil {
			err = live
		}
		var a acquired
		if err == nil {
			a = acquired{req: r, token: ss.prefix + newToken(), sent: sent}
			a.floor, err = ss.s.termFloor(r.Key)
		}
		if err != nil {
			res[i].Err = err
			continue
		}
		idx[r.Key] = i
		todo = append(todo, a)
	}
	slices.SortFunc(todo, func(a, b acquired) int { return strings.Compare(a.req.Key, b.req.Key) })
	err := ss.sendBatch(ctx, todo)
	if outOfRange(err) {
		for _, a := range todo {
			ss.doubt(a.req.Key, a.token) // rolled back, but as for any failed batch
			l, err := ss.Acquire(ctx, a.req.Key, a.req.Identity, a.req.Value)
			res[idx[a.req.Key]] = tenure.AcquireResult{Lease: l, Err: err}
		}
		return res
	}
	if err != nil {
		err = ss.s.fail(ctx, "session acquire (batch)", err)
		for _, a := range todo {
			ss.doubt(a.req.Key, a.token)
			res[idx[a.req.Key]].Err = err
		}
		return res
	}
	for _, a := range todo {
		i := idx[a.req.Key]
		l, held, err := ss.outcome(a)
		if held {
			l, err = ss.Acquire(ctx, a.req.Key, a.req.Identity, a.req.Value) // reads the holder
		}
		res[i] = tenure.AcquireResult{Lease: l, Err: err}
	}
	return res
}

// sendBatch runs the acquire statement of every a in one batch, filling
// in what each answered.
func (ss *session) sendBatch(ctx context.Context, todo []acquired) error {
	if len(todo) == 0 {
		return nil
	}
	s := ss.s
	return retry(ctx, func() error {
		b := &pgx.Batch{}
		for i := range todo {
			a := &todo[i]
			r := a.req
			b.Queue(s.sessions.q.acquire, r.Key, r.Identity, a.token, s.channel, int64(a.floor.Term), r.Value, ss.id).
				QueryRow(func(row pgx.Row) error {
					var notified int64
					return row.Scan(&a.live, &a.term, &notified, &a.waitUS)
				})
		}
		return s.pool.SendBatch(ctx, b).Close()
	})
}
