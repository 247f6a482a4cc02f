package redis

import (
	"context"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
)

var _ tenure.BatchAcquirer = (*session)(nil)

// AcquireBatch implements [tenure.BatchAcquirer]: the acquire script of
// [session.Acquire] once per request, all pipelined in one round trip. Each
// script runs atomically on its own, as Acquire's does; a batch whose
// reply is lost leaves its grants to the next keep-alives, which release
// them, as for Acquire.
func (ss *session) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	res := make([]tenure.AcquireResult, len(reqs))
	var calls []acquireCall
	var idx []int // the request of each call
	for i, r := range reqs {
		c := tenure.Claim{Identity: r.Identity, TTL: ss.ttl, Value: r.Value}
		if err := tenure.CheckClaim(r.Key, c); err != nil {
			res[i].Err = err
			continue
		}
		if err := ss.usable("acquire"); err != nil {
			res[i].Err = err
			continue
		}
		a, err := ss.s.prepareAcquire(ctx, r.Key, c, ss.key, newToken())
		if err != nil {
			res[i].Err = err
			continue
		}
		calls, idx = append(calls, a), append(idx, i)
	}
	replies, err := ss.s.pipelineAcquires(ctx, calls)
	for k, a := range calls {
		var l tenure.Lease
		aerr := err
		if aerr == nil {
			l, aerr = ss.s.acquired(a, replies[k])
		}
		res[idx[k]].Lease, res[idx[k]].Err = ss.note(a.key, a.token, l, aerr)
	}
	return res
}

// pipelineAcquires runs the acquire script for every call in one
// pipeline, loading the script first if the server does not have it, and
// returns each reply. An error of the pipeline as a whole (the network,
// ctx) is returned alone, as the store's error.
func (s *Store) pipelineAcquires(ctx context.Context, calls []acquireCall) ([][]any, error) {
	if len(calls) == 0 {
		return nil, nil
	}
	var replies [][]any
	run := func() error {
		pipe := s.client.Pipeline()
		cmds := make([]*goredis.Cmd, len(calls))
		for i, a := range calls {
			cmds[i] = acquireScript.EvalSha(ctx, pipe, a.keys, a.args...)
		}
		_, _ = pipe.Exec(ctx) // each command's error is its own
		replies = make([][]any, len(calls))
		for i, cmd := range cmds {
			r, err := cmd.Slice()
			if err != nil {
				return err
			}
			replies[i] = r
		}
		return nil
	}
	err := s.call(ctx, func() error {
		err := run()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			if err = acquireScript.Load(ctx, s.client).Err(); err == nil {
				err = run()
			}
		}
		return err
	})
	if err != nil {
		return nil, s.fail(ctx, "acquire (batch)", err)
	}
	return replies, nil
}
