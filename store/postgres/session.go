package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/seen"
)

var _ tenure.SessionStore = (*Store)(nil)

// session is a [tenure.StoreSession]: a row of the sessions table, and the
// grants this process made in it.
type session struct {
	s      *Store
	id     string
	prefix string // id + ".": how every grant token of the session starts
	ttl    time.Duration
	cfg    *pgx.ConnConfig // of the session's own connection

	keep chan struct{} // a one-slot lock on conn: one keep-alive or close at a time
	conn *pgx.Conn     // the session's own connection (session_conn.go), nil until used

	mu       sync.Mutex
	epoch    uint64            // counts keep-alives sent
	grants   map[string]*grant // by key
	doubtful []doubt           // grants that may exist unknown to the caller
	ended    error             // why the session ended, nil while it lives
}

// doubt is a grant of the session that may exist though its caller was
// told otherwise: an Acquire whose reply was lost, a Release that failed.
// Keep-alives would keep it for as long as the session lives, holding
// the key from everybody, its own elector included; the next keep-alive
// releases it instead.
type doubt struct{ key, token string }

// grant is one grant of a session, as a keep-alive judges it.
type grant struct {
	lease tenure.Lease
	since uint64 // the epoch when it was made: later keep-alives judge it
	mark  uint64 // the epoch of the last keep-alive that renewed it
}

// OpenSession implements [tenure.SessionStore]: one row in the sessions
// table (see the package documentation), expiring on the server's clock
// ttl after its last keep-alive. The first call on a store creates what
// sessions need (a table, a column and an index) if missing.
func (s *Store) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	if ttl < time.Microsecond {
		return nil, fmt.Errorf("%w: session ttl %s is shorter than PostgreSQL's resolution of 1µs", tenure.ErrInvalid, ttl)
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := s.migrateSessions(ctx); err != nil {
		return nil, err
	}
	id := newToken()
	ss := &session{s: s, id: id, prefix: id + ".", ttl: ttl, cfg: s.pool.Config().ConnConfig,
		keep: make(chan struct{}, 1), grants: map[string]*grant{}}
	if !s.sessions.conns.add(ss) {
		return nil, tenure.ErrClosed
	}
	// On the session's own connection, which its keep-alives then find
	// ready.
	if err := ss.lock(ctx); err != nil {
		s.sessions.conns.remove(ss)
		return nil, err
	}
	defer ss.unlock()
	err := ss.exchange(ctx, func() *pgx.Batch {
		b := &pgx.Batch{}
		b.Queue(s.sessions.q.open, id, int64(ttl)).Exec(func(pgconn.CommandTag) error { return nil })
		return b
	})
	if err != nil {
		err = s.fail(ctx, "open session", err)
		return nil, ss.finish(err)
	}
	return ss, nil
}

// check returns why a call on the session cannot go ahead: the store's
// reasons, or the session's end as seen by this process.
func (ss *session) check(ctx context.Context) error {
	if err := ss.s.begin(ctx); err != nil {
		return err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.ended
}

// end records that the session ended because of err, forgetting its
// grants, and returns err.
func (ss *session) end(err error) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended == nil {
		ss.ended = err
	}
	ss.grants = map[string]*grant{}
	return err
}

// Acquire implements [tenure.StoreSession]. It is one statement: that of
// [Store.AcquireClaim], made only while the session lives (holding its row
// against a concurrent keep-alive or close), whose grant takes the
// session's expiry and TTL.
func (ss *session) Acquire(ctx context.Context, key, identity, value string) (tenure.Lease, error) {
	s := ss.s
	if err := tenure.CheckClaim(key, tenure.Claim{Identity: identity, TTL: ss.ttl, Value: value}); err != nil {
		return tenure.Lease{}, err
	}
	sent := time.Now()
	if err := ss.check(ctx); err != nil {
		return tenure.Lease{}, err
	}
	return s.grantOrHeld(ctx, key, func(floor seen.Grant) (tenure.Lease, bool, error) {
		token := ss.prefix + newToken()
		var live bool
		var term, notified, waitUS int64
		err := retry(ctx, func() error {
			return s.pool.QueryRow(ctx, s.sessions.q.acquire, key, identity, token, s.channel, int64(floor.Term), value, ss.id).
				Scan(&live, &term, &notified, &waitUS)
		})
		if err != nil {
			ss.doubt(key, token)
			return tenure.Lease{}, false, s.acquireFailed(ctx, "session acquire", key, err)
		}
		return ss.outcome(acquired{req: tenure.AcquireRequest{Key: key, Identity: identity, Value: value}, token: token,
			sent: sent, floor: floor, live: live, term: term, waitUS: waitUS})
	})
}

// acquired is what the session's acquire statement answered for one
// request, with what was known when it was sent.
type acquired struct {
	req          tenure.AcquireRequest
	token        string
	sent         time.Time
	floor        seen.Grant
	live         bool
	term, waitUS int64
}

// outcome turns a's answer into the lease granted, or the session's end,
// or reports the key held.
func (ss *session) outcome(a acquired) (l tenure.Lease, held bool, err error) {
	switch {
	case !a.live:
		return tenure.Lease{}, false, ss.end(fmt.Errorf("%w: the session expired or was closed", tenure.ErrLost))
	case a.term == 0:
		return tenure.Lease{}, true, nil
	}
	r := a.req
	l = tenure.Lease{Key: r.Key, Identity: r.Identity, Term: uint64(a.term), TTL: ss.ttl, Token: a.token, Value: r.Value,
		Wait: grantWait(a.sent, a.floor, a.waitUS)}
	ss.s.seen.Observe(r.Key, l.Term, ss.ttl)
	ss.add(l)
	return l, false, nil
}

// doubt records a grant that may exist unknown to the caller.
func (ss *session) doubt(key, token string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.doubtful = append(ss.doubtful, doubt{key, token})
}

// add records a grant made in the session. A keep-alive sent before it was
// made does not judge it.
func (ss *session) add(l tenure.Lease) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended == nil {
		ss.grants[l.Key] = &grant{lease: l, since: ss.epoch}
	}
}

// KeepAlive implements [tenure.StoreSession]. It is one transaction of two
// statements sent at once (one round trip, whatever the number of grants):
// the first moves the session's expiry to the server's now plus its TTL,
// the second copies it to every row still granted in the session and
// returns their keys and terms. The grants this process made before the
// keep-alive was sent and that are not among them are gone.
func (ss *session) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	if err := ss.lock(ctx); err != nil {
		return nil, err
	}
	defer ss.unlock()
	if err := ss.check(ctx); err != nil {
		if errors.Is(err, tenure.ErrLost) {
			ss.finish(err)
		}
		return nil, err
	}
	ss.mu.Lock()
	ss.epoch++
	epoch, doubts := ss.epoch, ss.doubtful
	ss.mu.Unlock()
	var k keepResult
	err := ss.exchange(ctx, func() *pgx.Batch {
		k = keepResult{}
		return ss.keepBatch(doubts, &k)
	})
	if err != nil {
		return nil, ss.s.fail(ctx, "session keep-alive", err)
	}
	ss.mu.Lock()
	ss.doubtful = ss.doubtful[len(doubts):]
	ss.mu.Unlock()
	if !k.live {
		return nil, ss.finish(fmt.Errorf("%w: the session expired or was closed", tenure.ErrLost))
	}
	return ss.judge(epoch, func(mark func(key string, term uint64)) {
		for _, r := range k.renewed {
			mark(r.key, uint64(r.term))
		}
	}), nil
}

// keepResult is what a keep-alive learns.
type keepResult struct {
	live    bool // the session lived, and now lives a TTL longer
	renewed []renewedGrant
}

// renewedGrant is a row a keep-alive extended.
type renewedGrant struct {
	key  string
	term int64
}

// keepBatch returns the statements of a keep-alive, in lock order: the
// session's row, then the rows of grants in doubt (released), then every
// row of the session (extended); they fill in k.
func (ss *session) keepBatch(doubts []doubt, k *keepResult) *pgx.Batch {
	s := ss.s
	b := &pgx.Batch{}
	b.Queue(s.sessions.q.keepSession, ss.id).Exec(func(tag pgconn.CommandTag) error {
		k.live = tag.RowsAffected() == 1
		return nil
	})
	if len(doubts) > 0 {
		keys, tokens := make([]string, len(doubts)), make([]string, len(doubts))
		for i, d := range doubts {
			keys[i], tokens[i] = d.key, d.token
		}
		b.Queue(s.sessions.q.releaseDoubtful, keys, tokens, s.channel).QueryRow(func(r pgx.Row) error {
			var released int64
			return r.Scan(&released)
		})
	}
	b.Queue(s.sessions.q.keepGrants, ss.id, ss.prefix).Query(func(r pgx.Rows) error {
		for r.Next() {
			k.renewed = append(k.renewed, renewedGrant{})
			x := &k.renewed[len(k.renewed)-1]
			if err := r.Scan(&x.key, &x.term); err != nil {
				return err
			}
		}
		return r.Err()
	})
	return b
}

// judge marks the grants that keep-alive epoch renewed (each reported to
// mark by renewed), then forgets and returns those it should have renewed
// and did not.
func (ss *session) judge(epoch uint64, renewed func(mark func(key string, term uint64))) []tenure.Lease {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	renewed(func(key string, term uint64) {
		if g := ss.grants[key]; g != nil && g.lease.Term == term {
			g.mark = epoch
		}
	})
	var gone []tenure.Lease
	for key, g := range ss.grants {
		if g.since < epoch && g.mark != epoch {
			gone = append(gone, g.lease)
			delete(ss.grants, key)
		}
	}
	return gone
}

// Release implements [tenure.StoreSession]: it forgets l, then releases it
// as [Store.Release] does. If that fails other than with ErrLost, the
// next keep-alive releases it.
func (ss *session) Release(ctx context.Context, l tenure.Lease) error {
	ss.mu.Lock()
	if g := ss.grants[l.Key]; g != nil && g.lease.Term == l.Term {
		delete(ss.grants, l.Key)
	}
	ss.mu.Unlock()
	err := ss.s.Release(ctx, l)
	if err != nil && !errors.Is(err, tenure.ErrLost) && !errors.Is(err, tenure.ErrClosed) && l.Token != "" {
		ss.doubt(l.Key, l.Token)
	}
	return err
}

// Close implements [tenure.StoreSession]. It is one transaction of two
// statements sent at once: the first deletes the session's row (so no
// grant can join it any more), the second releases every row still
// granted in it, notifying watchers as a release does. It returns an
// error matching [tenure.ErrLost] if the session had already ended.
func (ss *session) Close(ctx context.Context) error {
	if err := ss.lock(ctx); err != nil {
		return err
	}
	defer ss.unlock()
	if err := ss.check(ctx); err != nil {
		if errors.Is(err, tenure.ErrLost) {
			ss.finish(err)
		}
		return err
	}
	s := ss.s
	var existed, live bool
	err := ss.exchange(ctx, func() *pgx.Batch {
		existed, live = false, false
		b := &pgx.Batch{}
		b.Queue(s.sessions.q.closeSession, ss.id).Query(func(r pgx.Rows) error {
			for r.Next() {
				existed = true
				if err := r.Scan(&live); err != nil {
					return err
				}
			}
			return r.Err()
		})
		b.Queue(s.sessions.q.releaseSessions, ss.id, ss.prefix, s.channel).QueryRow(func(r pgx.Row) error {
			var released int64
			return r.Scan(&released)
		})
		return b
	})
	switch {
	case err != nil:
		// Whether it was closed or not, the caller is done with it: its
		// grants end with it at the latest.
		err = s.fail(ctx, "session close", err)
		ss.finish(fmt.Errorf("%w: the session was closed (%w)", tenure.ErrLost, err))
		return err
	case !existed || !live:
		return ss.finish(fmt.Errorf("%w: the session had expired", tenure.ErrLost))
	}
	ss.finish(fmt.Errorf("%w: the session was closed", tenure.ErrLost))
	return nil
}
