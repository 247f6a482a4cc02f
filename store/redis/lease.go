package redis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/token"
)

// Each key K is stored under three Redis keys, all with the hash tag {K} so
// they share a slot:
//
//	PREFIX:{K}:lease  hash format (see leaseFormat), holder, term, token,
//	                  ttl_ns, ttl_ms, value (the published value, absent
//	                  before tenure had one); expires
//	                  (PEXPIRE) when the grant does, judged by the server; a
//	                  grant made in a session instead has the field session
//	                  (the session's key) and no expiry (see session.go)
//	PREFIX:{K}:term   counter of grants, INCRed by each; never expires,
//	                  so terms never go back when a lease key expires
//	PREFIX:{K}:last   hash term, ttl_ms, exp_ms (the server time the last
//	                  grant expires, moved by each renewal), released (1
//	                  once released), session (the session's key of a
//	                  session grant, else ""); never expires: it tells a
//	                  grant that expired or was released from one that
//	                  vanished
//
// and events about K are PUBLISHed on PREFIX:{K}:events.

func (s *Store) leaseKey(key string) string { return s.prefix + ":{" + key + "}:lease" }
func (s *Store) termKey(key string) string  { return s.prefix + ":{" + key + "}:term" }
func (s *Store) lastKey(key string) string  { return s.prefix + ":{" + key + "}:last" }
func (s *Store) channel(key string) string  { return s.prefix + ":{" + key + "}:events" }
func (s *Store) keyspaceChannel(key string) string {
	return "__keyspace@" + strconv.Itoa(s.db) + "__:" + s.leaseKey(key)
}

// The scripts run atomically on the server: nothing else runs between
// their commands. Expiry and time are the server's (PEXPIRE, PTTL, TIME).
//
// A grant made in a session (see session.go) is a lease key without an
// expiry of its own whose field session names the session's key: it is
// held while that key exists, and its remaining time is that key's PTTL.
// leaseLua, the start of every script that reads a lease key, judges both
// kinds alike. bound(lease, left, ttl_ms, fallback) is left, the PTTL of
// a lease key outside a session, unless the key has no expiry or one
// further ahead than its TTL ttl_ms (fallback if ttl_ms is not a whole
// number, nil for none): the expiry was removed (PERSIST) or pushed ahead
// from outside, where no renewal puts it, and would keep the key held long
// after its holder stopped renewing. The key then expires a TTL from now,
// the most a renewal could have set, and bound returns that TTL.
const leaseLua = wholeLua + `
local function bound(lease, left, ttl_ms, fallback)
	local ttl = whole(ttl_ms)
	if not ttl or ttl < 1 or ttl > ` + maxTermLua + ` then
		ttl = fallback
	end
	if not ttl or left >= 0 and left <= ttl then
		return left
	end
	redis.call('PEXPIRE', lease, ttl)
	return ttl
end

local function held(lease, session)
	if session then
		local left = redis.call('PTTL', session)
		if left < 0 then
			return false -- gone, or overwritten from outside without an expiry
		end
		return left
	end
	return redis.call('PTTL', lease)
end
`

// wholeLua starts the scripts that read numbers written into the keys:
// whole(v) is v as a number if it is a string of at most 17 decimal digits
// with an optional minus sign, else nil. Lua's tonumber also reads
// fractions, exponents, hexadecimal, "inf" and "nan", none of which INCR
// or PEXPIRE take, nor a term or expiry can be.
const wholeLua = `
local function whole(v)
	if type(v) ~= 'string' or #v > 18 or not string.match(v, '^%-?%d+$') then
		return nil
	end
	return tonumber(v)
end
`

// leaseType starts the scripts that read a lease key: KIND is its Redis
// type, "hash" or "none" unless something else wrote another type there.
// unreadable(holder, format) is true for a lease hash this build cannot
// read (see leaseFormat): of another format, or without a holder field,
// which every grant of every format so far has.
const leaseType = `
local KIND = redis.call('TYPE', KEYS[1])['ok']
local function unreadable(holder, format)
	return KIND == 'hash' and (format and format ~= '` + leaseFormat + `' or not holder)
end
`

// leaseFormat is the format of the lease hashes this build writes, in
// their field format, and the only one it reads; a hash without the
// field (written before it was added) reads as this format. A change
// that older builds would misread (a field renamed, dropped or given
// another meaning, another rule for when a grant lives) must write
// another format: builds from this one on then refuse its grants, in an
// error naming the key and the format, instead of taking them for free
// keys or lower terms. Builds before it never check the field, so such a
// change must still not look free to them: keep the holder field and the
// hash's expiry.
const leaseFormat = "1"

// maxTermLua is the highest term the acquire script grants: 2^53-1, the
// largest integer Redis's Lua (whose numbers are doubles) holds exactly.
// Past it term+1 rounds, and the script would grant a term not above one
// already handed out or seen; a counter or term written that high from
// outside makes Acquire fail instead.
const maxTermLua = "9007199254740991"

var (
	// KEYS: lease, term, last, and the session's key for a session grant.
	// ARGV: identity, token, ttl_ms, ttl_ns, channel, floor (the highest
	// term the handle saw), seen_ttl_ms (the TTL of that grant), value.
	// Returns {1,
	// term, wait_ms, repaired} when granted, {0, holder, term, ttl_ns,
	// pttl, value} when held, {2} when the session ended, {3} when the
	// counter, the last grant's term or floor is not a whole number below
	// maxTerm, or the counter or the last grant's record is a Redis value
	// of another type (written by something else), {4, type} when the
	// lease key is a Redis value of another type than a hash, {5, format}
	// when it is a hash this build cannot read (see leaseFormat).
	//
	// wait_ms is what is left of the last grant's renew window if it ended
	// neither by release nor by expiry (its lease key deleted or evicted,
	// or its session's key), or the handle's last seen TTL (at least this
	// grant's) when the record of the last grant is gone although the
	// counter or the handle says there was one, or its expiry is not a
	// number (cleared or overwritten from outside) or lies further ahead
	// than the longest TTL known (the last grant's, this one's, the
	// handle's last seen): that longest TTL. A session grant's window is
	// its session's, kept in the session's expiry key. repaired
	// is 1 when the counter was at or below a term already handed out
	// (deleted or evicted) and was moved past it.
	acquireScript = goredis.NewScript(leaseLua + leaseType + `
local maxTerm = ` + maxTermLua + `
if KIND ~= 'hash' and KIND ~= 'none' then
	return {4, KIND}
end
local cur = redis.call('HMGET', KEYS[1], 'holder', 'term', 'ttl_ns', 'value', 'session', 'ttl_ms', 'format')
if unreadable(cur[1], cur[7]) then
	return {5, cur[7] or ''}
end
if cur[1] then
	local left = held(KEYS[1], cur[5])
	if left and not cur[5] then
		left = bound(KEYS[1], left, cur[6], math.max(tonumber(ARGV[3]), tonumber(ARGV[7])))
	end
	if left then
		return {0, cur[1], cur[2], cur[3], left, cur[4] or ''}
	end
end
local session = KEYS[4]
if session and redis.call('TYPE', session)['ok'] ~= 'hash' then
	return {2} -- gone, or overwritten from outside
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local floor = tonumber(ARGV[6])
local wait = 0
local last = redis.pcall('HMGET', KEYS[3], 'term', 'exp_ms', 'released', 'session', 'ttl_ms')
local counter = redis.pcall('GET', KEYS[2])
if last.err or type(counter) == 'table' then
	return {3} -- of another type (WRONGTYPE): no term can be read
end
counter = whole(counter or '0')
if last[1] then
	floor = math.max(floor, whole(last[1]) or maxTerm)
end
if not counter or counter >= maxTerm or floor >= maxTerm then
	return {3}
end
if last[1] then
	local exp = whole(last[2])
	if last[4] and last[4] ~= '' then
		-- The session's expiry key outlives the session by a TTL. Without
		-- it, the session ended over a TTL ago or its keys were deleted
		-- from outside, which nothing tells apart: no expiry (nil) makes
		-- the grant wait as for a lost record.
		exp = whole(redis.pcall('GET', last[4] .. ':exp'))
	end
	local window = math.max(tonumber(ARGV[7]), tonumber(ARGV[3]), whole(last[5]) or 0)
	if last[3] ~= '1' and (not exp or exp - now > window) then
		-- The expiry was cleared or overwritten from outside: the last
		-- holder's window is unknown, so wait as for a lost record.
		wait = window
	elseif last[3] ~= '1' and exp > now then
		wait = exp - now
	end
elseif counter > 0 or floor > 0 then
	wait = math.max(tonumber(ARGV[7]), tonumber(ARGV[3]))
end
local term = redis.call('INCR', KEYS[2])
local repaired = 0
if term <= floor then
	term = floor + 1
	redis.call('SET', KEYS[2], term)
	repaired = 1
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'format', '` + leaseFormat + `', 'holder', ARGV[1], 'term', term, 'token', ARGV[2], 'ttl_ns', ARGV[4], 'ttl_ms', ARGV[3], 'value', ARGV[8])
local exp = now + tonumber(ARGV[3])
if session then
	redis.call('HSET', KEYS[1], 'session', session)
	redis.call('HSET', session, KEYS[1], ARGV[2])
	exp = now + redis.call('PTTL', session)
else
	redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
redis.call('HSET', KEYS[3], 'term', term, 'ttl_ms', ARGV[3], 'exp_ms', exp, 'released', 0, 'session', session or '')
redis.call('PUBLISH', ARGV[5], 'acquired')
return {1, term, wait, repaired}
`)

	// KEYS: lease, last. ARGV: identity, term, token. Returns 1 if renewed,
	// the lease key's type if it is neither a hash nor missing, else 0. A session grant is
	// renewed by its session only. A ttl_ms that is not a positive whole
	// number below 2^53 (written from outside) is no renewal: PEXPIRE with
	// 0 or less would delete the grant it was renewing, and refuses more.
	// A last-grant record of another type is left as it is.
	renewScript = goredis.NewScript(wholeLua + leaseType + `
if KIND ~= 'hash' and KIND ~= 'none' then
	return KIND
end
local cur = redis.call('HMGET', KEYS[1], 'holder', 'term', 'token', 'ttl_ms', 'session')
local ttl = whole(cur[4])
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] or not ttl or ttl < 1 or ttl > ` + maxTermLua + ` or cur[5] then
	return 0
end
redis.call('PEXPIRE', KEYS[1], ttl)
if redis.pcall('HGET', KEYS[2], 'term') == ARGV[2] then
	local t = redis.call('TIME')
	local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
	redis.call('HSET', KEYS[2], 'exp_ms', now + ttl)
end
return 1
`)

	// KEYS: lease, last. ARGV: identity, term, token, channel. Returns 1
	// if released, the lease key's type if it is neither a hash nor
	// missing, else 0. A
	// session grant leaves its session's set.
	releaseScript = goredis.NewScript(leaseLua + leaseType + `
if KIND ~= 'hash' and KIND ~= 'none' then
	return KIND
end
local cur = redis.call('HMGET', KEYS[1], 'holder', 'term', 'token', 'session')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] or not held(KEYS[1], cur[4]) then
	return 0
end
redis.call('DEL', KEYS[1])
if cur[4] then
	redis.call('HDEL', cur[4], KEYS[1])
end
if redis.pcall('HGET', KEYS[2], 'term') == ARGV[2] then
	redis.call('HSET', KEYS[2], 'released', 1)
end
redis.call('PUBLISH', ARGV[4], 'released')
return 1
`)

	// KEYS: lease, term. Returns {holder, term, ttl_ns, pttl, value} when
	// held, {'', last term or '0'} when free, {'', 'lease' or 'term',
	// type} when the lease key or the counter is a Redis value of another
	// type than a hash or a string, {'', 'format', format} when the lease
	// key is a hash this build cannot read (see leaseFormat).
	getScript = goredis.NewScript(leaseLua + leaseType + `
if KIND ~= 'hash' and KIND ~= 'none' then
	return {'', 'lease', KIND}
end
local cur = redis.call('HMGET', KEYS[1], 'holder', 'term', 'ttl_ns', 'value', 'session', 'ttl_ms', 'format')
if unreadable(cur[1], cur[7]) then
	return {'', 'format', cur[7] or ''}
end
if cur[1] then
	local left = held(KEYS[1], cur[5])
	if left and not cur[5] then
		left = bound(KEYS[1], left, cur[6], nil)
	end
	if left then
		return {cur[1], cur[2], cur[3], left, cur[4] or ''}
	end
end
local counter = redis.pcall('GET', KEYS[2])
if type(counter) == 'table' then
	return {'', 'term', redis.call('TYPE', KEYS[2])['ok']}
end
return {'', counter or '0'}
`)
)

// newToken returns a new grant or session token: 16 random bytes, hex-encoded.
func newToken() string { return token.Hex(16) }

// Acquire implements [tenure.Store] with one script: if the lease key does
// not exist (never granted, released, or expired on the server) it INCRs
// the term counter and writes the grant with a PEXPIRE of ttl. The term is
// above the highest this Store saw for the key even if the counter was
// deleted or evicted, and the grant's Wait covers the last grant's renew
// window if that grant vanished (see the package documentation).
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Store.Acquire], keeping
// c.Value in the lease hash's value field, so it expires and is deleted
// with the grant.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	return s.acquire(ctx, key, c, "", newToken())
}

// acquire grants key for c with token, in the session whose Redis key is
// session if that is not empty: the grant then has no expiry of its own and
// lives as long as the session. An ended session gives an error matching
// [tenure.ErrLost].
func (s *Store) acquire(ctx context.Context, key string, c tenure.Claim, session, token string) (tenure.Lease, error) {
	a, err := s.prepareAcquire(ctx, key, c, session, token)
	if err != nil {
		return tenure.Lease{}, err
	}
	var res []any
	err = s.call(ctx, func() (err error) {
		res, err = acquireScript.Run(ctx, s.client, a.keys, a.args...).Slice()
		return err
	})
	if err != nil {
		return tenure.Lease{}, s.fail(ctx, "acquire", err)
	}
	return s.acquired(a, res)
}

// acquireCall is one run of the acquire script, with what was known when
// it was sent.
type acquireCall struct {
	key, token string
	c          tenure.Claim
	sent       time.Time
	keys       []string
	args       []any
}

// prepareAcquire checks an Acquire of key for c in session ("" for none)
// with token, and returns the script's keys and arguments.
func (s *Store) prepareAcquire(ctx context.Context, key string, c tenure.Claim, session, token string) (acquireCall, error) {
	if err := tenure.CheckClaim(key, c); err != nil {
		return acquireCall{}, err
	}
	if c.TTL < time.Millisecond {
		return acquireCall{}, fmt.Errorf("%w: ttl %s is shorter than Redis's resolution of 1ms", tenure.ErrInvalid, c.TTL)
	}
	if err := s.begin(ctx); err != nil {
		return acquireCall{}, err
	}
	sent := time.Now()
	if err := s.checkEviction(ctx, s.client); err != nil {
		return acquireCall{}, err
	}
	floor := s.seen.Highest(key)
	keys := []string{s.leaseKey(key), s.termKey(key), s.lastKey(key)}
	if session != "" {
		keys = append(keys, session)
	}
	args := []any{c.Identity, token, c.TTL.Milliseconds(), int64(c.TTL), s.channel(key),
		floor.Term, floor.TTL.Milliseconds(), c.Value}
	return acquireCall{key: key, token: token, c: c, sent: sent, keys: keys, args: args}, nil
}

// acquired turns the acquire script's reply res to a into the lease, the
// holder's *HeldError, or the session's end.
func (s *Store) acquired(a acquireCall, res []any) (tenure.Lease, error) {
	if len(res) == 0 {
		return tenure.Lease{}, fmt.Errorf("tenure/redis: acquire on %s: empty reply", s.redacted)
	}
	switch code, _ := res[0].(int64); {
	case code == 1 && len(res) == 4:
		term, ok := res[1].(int64)
		waitMS, ok2 := res[2].(int64)
		repaired, _ := res[3].(int64)
		if !ok || !ok2 || term <= 0 {
			return tenure.Lease{}, fmt.Errorf("tenure/redis: acquire on %s: unexpected reply %s", s.redacted, replyString(res))
		}
		if repaired == 1 {
			s.repairs.Add(1)
		}
		s.seen.Observe(a.key, uint64(term), a.c.TTL)
		return tenure.Lease{Key: a.key, Identity: a.c.Identity, Term: uint64(term), TTL: a.c.TTL, Token: a.token,
			Wait: seen.WaitSince(a.sent, time.Duration(waitMS)*time.Millisecond), Value: a.c.Value}, nil
	case code == 2:
		return tenure.Lease{}, fmt.Errorf("%w: tenure/redis: acquire of %q: the session expired, was closed, or was deleted or overwritten from outside", tenure.ErrLost, a.key)
	case code == 3:
		return tenure.Lease{}, fmt.Errorf("%w: tenure/redis: acquire of %q on %s: its term counter or last grant's term, or a term this Store saw for it, is not a whole number below 2^53-1 (or not of its Redis type), past which Redis scripts do not count exactly (was it written by something else?)", tenure.ErrTermsExhausted, a.key, s.redacted)
	case code == 4 && len(res) == 2:
		return tenure.Lease{}, s.wrongType("acquire", a.key, "lease", res[1])
	case code == 5 && len(res) == 2:
		return tenure.Lease{}, s.unreadable("acquire", a.key, res[1])
	}
	r, err := s.record(a.key, res[1:])
	if err != nil {
		return tenure.Lease{}, err
	}
	s.seen.Observe(a.key, r.Term, r.TTL)
	return tenure.Lease{}, &tenure.HeldError{Record: r}
}

// Renew implements [tenure.Store]: the script checks holder, term and the
// grant's random token, then PEXPIREs the lease key by its TTL. A lease
// hash whose ttl_ms is not a positive whole number (written from outside)
// is not renewed (ErrLost): PEXPIRE by 0 or less would delete the grant.
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	return s.onGrant(ctx, "renew", renewScript, l)
}

// Release implements [tenure.Store]: the script checks the grant as Renew
// does, deletes the lease key (the term counter stays) and publishes.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	return s.onGrant(ctx, "release", releaseScript, l, s.channel(l.Key))
}

// onGrant runs script, one that acts on l's grant only while l holds it
// (holder, term and token match) and answers 1 if it did, on l's lease
// and term keys with l's identity, term and token and then extra as
// arguments. Any other answer is ErrLost; op names the call in errors.
func (s *Store) onGrant(ctx context.Context, op string, script *goredis.Script, l tenure.Lease, extra ...any) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	args := append([]any{l.Identity, strconv.FormatUint(l.Term, 10), l.Token}, extra...)
	var res any
	err := s.call(ctx, func() (err error) {
		res, err = script.Run(ctx, s.client, []string{s.leaseKey(l.Key), s.lastKey(l.Key)}, args...).Result()
		return err
	})
	if err != nil {
		return s.fail(ctx, op, err)
	}
	if kind, ok := res.(string); ok {
		return fmt.Errorf("%w: %w", tenure.ErrLost, s.wrongType(op, l.Key, "lease", kind))
	}
	if n, _ := res.(int64); n != 1 {
		return fmt.Errorf("%w: key %q term %d expired, was released or taken over", tenure.ErrLost, l.Key, l.Term)
	}
	return nil
}

// Get implements [tenure.Store]. Remaining is the server's PTTL.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
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
	r, err := s.record(key, res)
	if err != nil {
		return tenure.Record{}, err
	}
	return s.seen.Record(r), nil
}

// unknownHolder names the holder of a live lease hash whose holder field
// is empty (cleared from outside): it still blocks Acquire.
const unknownHolder = "(unknown)"

// record decodes {holder, term, ttl_ns, pttl, value} or {"", term}.
func (s *Store) record(key string, v []any) (tenure.Record, error) {
	bad := func() (tenure.Record, error) {
		return tenure.Record{}, fmt.Errorf("tenure/redis: unexpected record %s for key %q on %s (was it written by something else?)", replyString(v), key, s.redacted)
	}
	r := tenure.Record{Key: key}
	if len(v) == 3 && v[0] == "" && (v[1] == "lease" || v[1] == "term") {
		return tenure.Record{}, s.wrongType("get", key, v[1].(string), v[2])
	}
	if len(v) == 3 && v[0] == "" && v[1] == "format" {
		return tenure.Record{}, s.unreadable("get", key, v[2])
	}
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
	if len(v) == 2 && holder == "" {
		return r, nil
	}
	if len(v) != 5 {
		return bad()
	}
	if holder == "" {
		holder = unknownHolder // held, but the holder was cleared from outside
	}
	value, ok := v[4].(string)
	if !ok {
		return bad()
	}
	ttlStr, _ := v[2].(string)
	ttl, err := strconv.ParseInt(ttlStr, 10, 64)
	pttl, ok := v[3].(int64)
	if err != nil || !ok {
		return bad()
	}
	r.Holder, r.TTL, r.Value = holder, time.Duration(ttl), value
	if pttl > 0 {
		r.Remaining = time.Duration(pttl) * time.Millisecond
	}
	return r, nil
}

// wrongType is the error of op on key when the Redis key holding its
// record (what: "lease" for the lease hash, "term" for the counter) is a
// Redis value of type kind, written there by something else.
func (s *Store) wrongType(op, key, what string, kind any) error {
	name, want := s.leaseKey(key), "a hash"
	if what == "term" {
		name, want = s.termKey(key), "a string"
	}
	return fmt.Errorf("tenure/redis: %s of %q on %s: %q is a Redis %v, not %s (was it written by something else?)",
		op, key, s.redacted, name, kind, want)
}

// unreadable is the error of op on key when its lease hash is one this
// build cannot read (see leaseFormat): of format, or, for a format of ""
// or leaseFormat, without a holder field. The grant may be live, so the
// key is neither free nor granted.
func (s *Store) unreadable(op, key string, format any) error {
	quoted := replyString([]any{format})
	what := fmt.Sprintf("is of format %s, this build reads format %s", quoted[1:len(quoted)-1], leaseFormat)
	if f, _ := format.(string); f == "" || f == leaseFormat {
		what = "has no holder field"
	}
	return fmt.Errorf("tenure/redis: %s of %q on %s: lease hash %q %s (written by a newer tenure, or by something else?): not taken for a free key",
		op, key, s.redacted, s.leaseKey(key), what)
}

// replyString renders a script's reply for an error: strings quoted (any
// bytes can be written into the hash from outside) and cut to 64 bytes,
// so the error stays one short line.
func replyString(v []any) string {
	const max = 64
	parts := make([]string, len(v))
	for i, x := range v {
		str, ok := x.(string)
		if !ok {
			parts[i] = fmt.Sprint(x)
			continue
		}
		if len(str) > max {
			parts[i] = fmt.Sprintf("%q... (%d bytes)", str[:max], len(str))
		} else {
			parts[i] = strconv.Quote(str)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}
