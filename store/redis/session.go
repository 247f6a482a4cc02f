package redis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
)

var _ tenure.SessionStore = (*Store)(nil)

// A session ID lives in two Redis keys, outside every key's hash tag:
//
//	PREFIX:session:ID      hash: for each grant in the session, its lease
//	                       key's name -> the grant's token, and the field
//	                       "" -> ttl_ms, so that the hash exists without
//	                       grants; expires (PEXPIRE) when the session does,
//	                       judged by the server. A grant is held while this
//	                       key exists.
//	PREFIX:session:ID:exp  the server time (ms) the session expires, moved
//	                       by each keep-alive; it outlives the session by a
//	                       TTL, so that a grant whose lease key or session
//	                       key vanished makes the next grant wait out the
//	                       session's renew window.
//
// A grant of K in the session is K's ordinary lease key, without an expiry
// of its own, whose field session names PREFIX:session:ID (see leaseLua).
func (s *Store) sessionKey(id string) string { return s.prefix + ":session:" + id }

// releaseGrantLua starts the scripts that release a session's grants:
// release(lease key, term) deletes the lease key, marks the last-grant
// record released if it is the grant's, and publishes the release.
const releaseGrantLua = `
local function release(lease, term)
	local base = string.sub(lease, 1, -6)
	redis.call('DEL', lease)
	if redis.pcall('HGET', base .. 'last', 'term') == term then
		redis.call('HSET', base .. 'last', 'released', 1)
	end
	redis.call('PUBLISH', base .. 'events', 'released')
end
`

var (
	// KEYS: session, exp. ARGV: ttl_ms. Returns 1.
	openSessionScript = goredis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[1], '', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], now + tonumber(ARGV[1]), 'PX', 2 * tonumber(ARGV[1]))
return 1
`)

	// KEYS: session, exp. ARGV: ttl_ms, then pairs lease key, token of
	// grants an Acquire may have made without the client learning of it,
	// which it releases. Returns {0} if the session ended, else {1, lease
	// key, token, lease key, token...} naming the grants that are no
	// longer current (their lease key deleted, or rewritten with another
	// token, from outside), which it drops from the session.
	//
	// It writes two keys whatever the number of grants, and reads one field
	// of each grant's lease key: the least that notices every grant changed
	// from outside at the next keep-alive. A lease key rewritten as another
	// type (HGET fails) is gone too; a session key of another type than a
	// hash (overwritten from outside) is an ended session.
	keepAliveScript = goredis.NewScript(releaseGrantLua + `
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
	return {0} -- gone, or overwritten from outside
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], now + tonumber(ARGV[1]), 'PX', 2 * tonumber(ARGV[1]))
for i = 2, #ARGV, 2 do
	local cur = redis.pcall('HMGET', ARGV[i], 'token', 'term')
	if cur[1] == ARGV[i + 1] and redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[i + 1] then
		redis.call('HDEL', KEYS[1], ARGV[i])
		release(ARGV[i], cur[2])
	end
end
local gone = {1}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
	local f = all[i]
	if f ~= '' and redis.pcall('HGET', f, 'token') ~= all[i + 1] then
		redis.call('HDEL', KEYS[1], f)
		gone[#gone + 1] = f
		gone[#gone + 1] = all[i + 1]
	end
end
return gone
`)

	// KEYS: session, exp. Returns 0 if the session had ended, else 1 after
	// releasing every grant still current in it, as releaseScript does,
	// and deleting the session's keys.
	closeSessionScript = goredis.NewScript(releaseGrantLua + `
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
	return 0
end
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
	local f = all[i]
	local cur = f ~= '' and redis.pcall('HMGET', f, 'token', 'term')
	if cur and cur[1] == all[i + 1] then
		release(f, cur[2])
	end
end
redis.call('DEL', KEYS[1], KEYS[2])
return 1
`)
)

// keepsPending is how many successful keep-alives carry a grant an Acquire
// may have made unbeknownst to the client, to release it: more than one,
// in case the Acquire's script runs after the first.
const keepsPending = 3

// session is one store session (see [Store.OpenSession]).
type session struct {
	s   *Store
	key string // PREFIX:session:ID
	ttl time.Duration

	mu      sync.Mutex
	grants  map[string]tenure.Lease // current grants by key, as the client knows them
	pending map[string]*pending     // by token: grants Acquire may have made without saying so
	early   map[string]bool         // tokens reported gone before their Acquire returned
	closed  bool
}

// pending is a grant whose Acquire failed without saying whether it was
// made (its ctx ended, the connection failed). Made, it would live as long
// as the session with no elector knowing of it, and keep its key from
// everybody, so the next keep-alives release it if it exists.
type pending struct {
	lease string // lease key
	sent  int    // successful keep-alives that carried it
}

// OpenSession implements [tenure.SessionStore] with one script that
// writes the session's key, expiring ttl (whole milliseconds, at least
// one) after the server ran it. Grants made in the session live as long as
// that key; [tenure.StoreSession.KeepAlive] is one script whatever their
// number. A server in cluster mode is refused with an error wrapping
// [errors.ErrUnsupported]: a session's scripts touch keys of many slots.
func (s *Store) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("%w: session ttl %s is shorter than Redis's resolution of 1ms", tenure.ErrInvalid, ttl)
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := s.checkEviction(ctx, s.keeper); err != nil {
		return nil, err
	}
	if err := s.checkNotCluster(ctx); err != nil {
		return nil, err
	}
	ss := &session{s: s, key: s.sessionKey(newToken()), ttl: ttl,
		grants: map[string]tenure.Lease{}, pending: map[string]*pending{}, early: map[string]bool{}}
	err := s.call(ctx, func() error {
		return openSessionScript.Run(ctx, s.keeper, []string{ss.key, ss.key + ":exp"}, ttl.Milliseconds()).Err()
	})
	if err != nil {
		return nil, s.fail(ctx, "open session", err)
	}
	return ss, nil
}

// lost is the error of a call on a session that ended.
func (ss *session) lost(op string) error {
	return fmt.Errorf("%w: tenure/redis: session %s: the session expired, was closed, or was deleted or overwritten from outside", tenure.ErrLost, op)
}

// usable returns an error matching [tenure.ErrLost] once the session was
// closed through this handle.
func (ss *session) usable(op string) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return ss.lost(op)
	}
	return nil
}

// Acquire implements [tenure.StoreSession] with the acquire script of
// [Store.Acquire], which also checks that the session lives and adds the
// grant to it. An ended session gives an error matching [tenure.ErrLost].
// If Acquire fails without knowing whether the grant was made (ctx, the
// network), the next keep-alives release the grant if it was.
func (ss *session) Acquire(ctx context.Context, key, identity, value string) (tenure.Lease, error) {
	c := tenure.Claim{Identity: identity, TTL: ss.ttl, Value: value}
	if err := ss.usable("acquire"); err != nil {
		if cerr := tenure.CheckClaim(key, c); cerr != nil {
			return tenure.Lease{}, cerr
		}
		return tenure.Lease{}, err
	}
	token := newToken()
	l, err := ss.s.acquire(ctx, key, c, ss.key, token)
	return ss.note(key, token, l, err)
}

// note records the outcome of an Acquire of key with token (l or err) in
// the session's view and returns it, or the error of a grant taken away
// before Acquire returned.
func (ss *session) note(key, token string, l tenure.Lease, err error) (tenure.Lease, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var held *tenure.HeldError
	switch {
	case err != nil && !errors.As(err, &held) && !errors.Is(err, tenure.ErrInvalid) &&
		!errors.Is(err, tenure.ErrLost) && !errors.Is(err, tenure.ErrClosed):
		ss.pending[token] = &pending{lease: ss.s.leaseKey(key)}
		return l, err
	case err != nil:
		return l, err
	case ss.early[token]:
		delete(ss.early, token)
		return tenure.Lease{}, fmt.Errorf("%w: tenure/redis: the grant of %q in term %d was deleted or rewritten from outside before Acquire returned",
			tenure.ErrLost, key, l.Term)
	}
	ss.grants[key] = l
	return l, nil
}

// KeepAlive implements [tenure.StoreSession]: one script moves the
// session's expiry and reads every grant's lease key on the server, so the
// request is the same whatever the number of grants (the server's work is
// not: see the package documentation). OpenSession, keep-alives and Close
// use a pool of two connections of their own, so that they never wait
// behind other calls of the Store for a connection.
func (ss *session) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	s := ss.s
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := ss.usable("keep-alive"); err != nil {
		return nil, err
	}
	args, carried := ss.pendingArgs()
	var res []any
	err := s.call(ctx, func() (err error) {
		res, err = keepAliveScript.Run(ctx, s.keeper, []string{ss.key, ss.key + ":exp"}, args...).Slice()
		return err
	})
	if err != nil {
		return nil, s.fail(ctx, "session keep-alive", err)
	}
	if len(res) == 0 || len(res)%2 != 1 {
		return nil, fmt.Errorf("tenure/redis: session keep-alive on %s: unexpected reply of %d elements", s.redacted, len(res))
	}
	if ok, _ := res[0].(int64); ok != 1 {
		return nil, ss.lost("keep-alive")
	}
	return ss.forget(res[1:], carried)
}

// pendingArgs returns the keep-alive script's arguments: the TTL, then
// the pending grants, whose tokens it returns too.
func (ss *session) pendingArgs() ([]any, []string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	args := []any{ss.ttl.Milliseconds()}
	var tokens []string
	for token, p := range ss.pending {
		args = append(args, p.lease, token)
		tokens = append(tokens, token)
	}
	return args, tokens
}

// forget counts a successful keep-alive for the pending grants it carried,
// drops from the client's view the grants named by pairs lease key, token
// and returns those it knew.
func (ss *session) forget(pairs []any, carried []string) ([]tenure.Lease, error) {
	var gone []tenure.Lease
	head, tail := ss.s.prefix+":{", "}:lease"
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, token := range carried {
		if p := ss.pending[token]; p != nil {
			if p.sent++; p.sent >= keepsPending {
				delete(ss.pending, token)
			}
		}
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		lk, _ := pairs[i].(string)
		token, _ := pairs[i+1].(string)
		if !strings.HasPrefix(lk, head) || !strings.HasSuffix(lk, tail) || len(lk) < len(head)+len(tail) {
			return gone, fmt.Errorf("tenure/redis: session keep-alive on %s: unexpected lease key %q", ss.s.redacted, lk)
		}
		key := lk[len(head) : len(lk)-len(tail)]
		switch l, ok := ss.grants[key]; {
		case ok && l.Token == token:
			delete(ss.grants, key)
			gone = append(gone, l)
		case ss.pending[token] != nil:
			delete(ss.pending, token)
		default:
			// Its Acquire has not returned yet: it will say so.
			ss.early[token] = true
		}
	}
	return gone, nil
}

// Release implements [tenure.StoreSession] with the release script of
// [Store.Release], which also drops the grant from the session. A grant
// of an ended session gives an error matching [tenure.ErrLost].
func (ss *session) Release(ctx context.Context, l tenure.Lease) error {
	err := ss.s.Release(ctx, l)
	if err == nil || errors.Is(err, tenure.ErrLost) {
		ss.mu.Lock()
		if cur, ok := ss.grants[l.Key]; ok && cur.Term == l.Term {
			delete(ss.grants, l.Key)
		}
		ss.mu.Unlock()
	}
	return err
}

// Close implements [tenure.StoreSession]: one script releases every grant
// still current in the session (deleting its lease key and publishing the
// release to watchers) and deletes the session's keys. If the session had
// already ended it returns an error matching [tenure.ErrLost]. If Close
// fails otherwise (ctx, network) it may be called again; the grants expire
// with the session in any case.
func (ss *session) Close(ctx context.Context) error {
	s := ss.s
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := ss.usable("close"); err != nil {
		return err
	}
	var n int64
	err := s.call(ctx, func() (err error) {
		n, err = closeSessionScript.Run(ctx, s.keeper, []string{ss.key, ss.key + ":exp"}).Int64()
		return err
	})
	if err != nil {
		return s.fail(ctx, "close session", err)
	}
	ss.mu.Lock()
	ss.closed, ss.grants, ss.pending = true, map[string]tenure.Lease{}, map[string]*pending{}
	ss.mu.Unlock()
	if n != 1 {
		return ss.lost("close")
	}
	return nil
}

// checkNotCluster refuses, once per Store, a server in cluster mode: the
// session scripts touch keys of many hash slots, which Redis Cluster
// refuses. A server that refuses INFO is given the benefit of the doubt.
func (s *Store) checkNotCluster(ctx context.Context) error {
	s.clusterMu.Lock()
	defer s.clusterMu.Unlock()
	if s.clusterChecked {
		return nil
	}
	var info string
	err := s.call(ctx, func() (err error) {
		info, err = s.keeper.Info(ctx, "cluster").Result()
		return err
	})
	var rerr goredis.Error
	switch {
	case errors.As(err, &rerr):
	case err != nil:
		return s.fail(ctx, "check cluster mode", err)
	case strings.Contains(info, "cluster_enabled:1"):
		return fmt.Errorf("tenure/redis: %s runs in cluster mode, where a session cannot keep grants of keys in many hash slots: %w",
			s.redacted, errors.ErrUnsupported)
	}
	s.clusterChecked = true
	return nil
}
