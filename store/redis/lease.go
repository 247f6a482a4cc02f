package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
)

// Each key K is stored under two Redis keys, both with the hash tag {K} so
// they share a slot:
//
//	PREFIX:{K}:lease  hash holder, term, token, ttl_ns, ttl_ms; expires
//	                  (PEXPIRE) when the grant does, judged by the server
//	PREFIX:{K}:term   counter of grants, INCRed by each; never expires,
//	                  so terms never go back when a lease key expires
//
// and events about K are PUBLISHed on PREFIX:{K}:events.

func (s *Store) leaseKey(key string) string { return s.prefix + ":{" + key + "}:lease" }
func (s *Store) termKey(key string) string  { return s.prefix + ":{" + key + "}:term" }
func (s *Store) channel(key string) string  { return s.prefix + ":{" + key + "}:events" }
func (s *Store) keyspaceChannel(key string) string {
	return "__keyspace@" + strconv.Itoa(s.db) + "__:" + s.leaseKey(key)
}

// The scripts run atomically on the server: nothing else runs between
// their commands. Expiry is the server's (PEXPIRE, PTTL).
var (
	// KEYS: lease, term. ARGV: identity, token, ttl_ms, ttl_ns, channel.
	// Returns {1, term} when granted, {0, holder, term, ttl_ns, pttl} when
	// held.
	acquireScript = goredis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'holder', 'term', 'ttl_ns')
if cur[1] then
	return {0, cur[1], cur[2], cur[3], redis.call('PTTL', KEYS[1])}
end
local term = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'term', term, 'token', ARGV[2], 'ttl_ns', ARGV[4], 'ttl_ms', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PUBLISH', ARGV[5], 'acquired')
return {1, term}
`)

	// KEYS: lease. ARGV: identity, term, token. Returns 1 if renewed.
	renewScript = goredis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'holder', 'term', 'token', 'ttl_ms')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] or not cur[4] then
	return 0
end
redis.call('PEXPIRE', KEYS[1], cur[4])
return 1
`)

	// KEYS: lease. ARGV: identity, term, token, channel. Returns 1 if
	// released.
	releaseScript = goredis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'holder', 'term', 'token')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] then
	return 0
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[4], 'released')
return 1
`)

	// KEYS: lease, term. Returns {holder, term, ttl_ns, pttl} when held,
	// {'', last term or '0'} when free.
	getScript = goredis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'holder', 'term', 'ttl_ns')
if cur[1] then
	return {cur[1], cur[2], cur[3], redis.call('PTTL', KEYS[1])}
end
return {'', redis.call('GET', KEYS[2]) or '0'}
`)
)

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Acquire implements [tenure.Store] with one script: if the lease key does
// not exist (never granted, released, or expired on the server) it INCRs
// the term counter and writes the grant with a PEXPIRE of ttl.
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	if err := tenure.CheckAcquire(key, identity, ttl); err != nil {
		return tenure.Lease{}, err
	}
	if ttl < time.Millisecond {
		return tenure.Lease{}, fmt.Errorf("%w: ttl %s is shorter than Redis's resolution of 1ms", tenure.ErrInvalid, ttl)
	}
	if err := s.begin(ctx); err != nil {
		return tenure.Lease{}, err
	}
	token := newToken()
	var res []any
	err := s.call(ctx, func() (err error) {
		res, err = acquireScript.Run(ctx, s.client,
			[]string{s.leaseKey(key), s.termKey(key)},
			identity, token, ttl.Milliseconds(), int64(ttl), s.channel(key)).Slice()
		return err
	})
	if err != nil {
		return tenure.Lease{}, s.fail(ctx, "acquire", err)
	}
	if granted, _ := res[0].(int64); granted == 1 && len(res) == 2 {
		term, ok := res[1].(int64)
		if !ok || term <= 0 {
			return tenure.Lease{}, fmt.Errorf("tenure/redis: acquire on %s: unexpected term %v", s.redacted, res[1])
		}
		return tenure.Lease{Key: key, Identity: identity, Term: uint64(term), TTL: ttl, Token: token}, nil
	}
	r, err := s.record(key, res[1:])
	if err != nil {
		return tenure.Lease{}, err
	}
	return tenure.Lease{}, &tenure.HeldError{Record: r}
}

// Renew implements [tenure.Store]: the script checks holder, term and the
// grant's random token, then PEXPIREs the lease key by its TTL.
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	var n int64
	err := s.call(ctx, func() (err error) {
		n, err = renewScript.Run(ctx, s.client, []string{s.leaseKey(l.Key)},
			l.Identity, strconv.FormatUint(l.Term, 10), l.Token).Int64()
		return err
	})
	if err != nil {
		return s.fail(ctx, "renew", err)
	}
	if n != 1 {
		return fmt.Errorf("%w: key %q term %d expired, was released or taken over", tenure.ErrLost, l.Key, l.Term)
	}
	return nil
}

// Release implements [tenure.Store]: the script checks the grant as Renew
// does, deletes the lease key (the term counter stays) and publishes.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	var n int64
	err := s.call(ctx, func() (err error) {
		n, err = releaseScript.Run(ctx, s.client, []string{s.leaseKey(l.Key)},
			l.Identity, strconv.FormatUint(l.Term, 10), l.Token, s.channel(l.Key)).Int64()
		return err
	})
	if err != nil {
		return s.fail(ctx, "release", err)
	}
	if n != 1 {
		return fmt.Errorf("%w: key %q term %d expired, was released or taken over", tenure.ErrLost, l.Key, l.Term)
	}
	return nil
}

// Get implements [tenure.Store]. Remaining is the server's PTTL.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return tenure.Record{}, err
	}
	if err := s.begin(ctx); err != nil {
		return tenure.Record{}, err
	}
	var res []any
	err := s.call(ctx, func() (err error) {
		res, err = getScript.Run(ctx, s.client, []string{s.leaseKey(key), s.termKey(key)}).Slice()
		return err
	})
	if err != nil {
		return tenure.Record{}, s.fail(ctx, "get", err)
	}
	return s.record(key, res)
}

// record decodes {holder, term, ttl_ns, pttl} or {"", term}.
func (s *Store) record(key string, v []any) (tenure.Record, error) {
	bad := func() (tenure.Record, error) {
		return tenure.Record{}, fmt.Errorf("tenure/redis: unexpected record %v for key %q on %s (was it written by something else?)", v, key, s.redacted)
	}
	r := tenure.Record{Key: key}
	if len(v) < 2 {
		return bad()
	}
	holder, _ := v[0].(string)
	termStr, _ := v[1].(string)
	term, err := strconv.ParseUint(termStr, 10, 64)
	if err != nil {
		return bad()
	}
	r.Term = term
	if holder == "" {
		return r, nil
	}
	if len(v) != 4 {
		return bad()
	}
	ttlStr, _ := v[2].(string)
	ttl, err := strconv.ParseInt(ttlStr, 10, 64)
	pttl, ok := v[3].(int64)
	if err != nil || !ok {
		return bad()
	}
	r.Holder, r.TTL = holder, time.Duration(ttl)
	if pttl > 0 {
		r.Remaining = time.Duration(pttl) * time.Millisecond
	}
	return r, nil
}
