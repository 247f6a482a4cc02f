package etcd

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
)

var _ tenure.BatchAcquirer = (*session)(nil)

// batchKeys is how many keys one transaction of a batch grants. etcd
// limits the operations of a transaction (--max-txn-ops, default 128),
// nested transactions included: each key is a nested transaction of 3
// operations.
const batchKeys = 40

// AcquireBatch implements [tenure.BatchAcquirer]: every key's transaction
// of [session.Acquire], nested in one transaction per batchKeys keys, the
// transactions sent at once; the old grants' etcd leases are asked about
// once each, not once per key. A server whose --max-txn-ops is below
// what a transaction needs gets the keys one by one.
func (ss *session) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	res := make([]tenure.AcquireResult, len(reqs))
	var todo []int
	for i, r := range reqs {
		c := tenure.Claim{Identity: r.Identity, TTL: ss.ttl, Value: r.Value}
		if err := tenure.CheckClaim(r.Key, c); err != nil {
			res[i].Err = err
			continue
		}
		todo = append(todo, i)
	}
	if err := ss.s.usable(ctx); err != nil {
		for _, i := range todo {
			res[i].Err = err
		}
		return res
	}
	ttls := &leaseTTLs{ctx: ctx, s: ss.s, got: map[clientv3.LeaseID]*ttlAnswer{}}
	var wg sync.WaitGroup
	for len(todo) > 0 {
		chunk := todo[:min(batchKeys, len(todo))]
		todo = todo[len(chunk):]
		wg.Go(func() { ss.acquireChunk(ctx, reqs, chunk, res, ttls) })
	}
	wg.Wait()
	return res
}

// acquireChunk grants the requests of reqs at indexes chunk in one
// transaction, filling in res.
func (ss *session) acquireChunk(ctx context.Context, reqs []tenure.AcquireRequest, chunk []int, res []tenure.AcquireResult, ttls *leaseTTLs) {
	s := ss.s
	sent := time.Now()
	ops := make([]clientv3.Op, len(chunk))
	as := make([]granting, len(chunk))
	for k, i := range chunk {
		r := reqs[i]
		c := tenure.Claim{Identity: r.Identity, TTL: ss.ttl, Value: r.Value}
		as[k] = granting{key: r.Key, c: c, id: ss.id, shared: true, sent: sent, before: s.seen.Highest(r.Key)}
		cmp, then, els := s.grantOps(r.Key, c, ss.id, true)
		ops[k] = clientv3.OpTxn(cmp, then, els)
	}
	resp, err := s.c.Txn(ctx).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrTooManyOps) {
		for _, i := range chunk {
			res[i].Lease, res[i].Err = ss.Acquire(ctx, reqs[i].Key, reqs[i].Identity, reqs[i].Value)
		}
		return
	}
	if err != nil {
		// A grant the transaction may have made is deleted by the next
		// keep-alive (see Acquire).
		for k, i := range chunk {
			res[i].Err = s.fail(ctx, "acquire (batch)", as[k].key, err)
		}
		return
	}
	for k, i := range chunk {
		a := as[k]
		tr := resp.Responses[k].GetResponseTxn()
		a.ok, a.res, a.rev = tr.Succeeded, tr.Responses, resp.Header.Revision
		s.repairLeaseless(ctx, a)
		l, err := s.granted(a, func(prev *mvccpb.KeyValue) time.Duration {
			return s.vanishedWaitBy(a.sent, prev, a.before.TTL, ttls.of)
		})
		if err == nil {
			ss.track(l)
		}
		res[i].Lease, res[i].Err = l, err
	}
}

// leaseTTLs asks etcd for the TimeToLive of each etcd lease once, for a
// batch whose keys were mostly granted under the same few leases.
type leaseTTLs struct {
	ctx context.Context
	s   *Store
	mu  sync.Mutex
	got map[clientv3.LeaseID]*ttlAnswer
}

type ttlAnswer struct {
	once sync.Once
	resp *clientv3.LeaseTimeToLiveResponse
	err  error
}

func (t *leaseTTLs) of(id clientv3.LeaseID) (*clientv3.LeaseTimeToLiveResponse, error) {
	t.mu.Lock()
	a := t.got[id]
	if a == nil {
		a = &ttlAnswer{}
		t.got[id] = a
	}
	t.mu.Unlock()
	a.once.Do(func() { a.resp, a.err = t.s.c.TimeToLive(t.ctx, id) })
	return a.resp, a.err
}
