package memory

import (
	"context"
	"fmt"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/seen"
)

// session is one store session: its grants end when it does.
type session struct {
	s       *Store
	sn      *seen.Terms
	ttl     time.Duration
	expires time.Time
	ended   bool
	grants  map[string]tenure.Lease // by key
}

// ends returns when the session ends or ended.
func (ss *session) ends() time.Time {
	if ss.ended {
		return time.Time{}
	}
	return ss.expires
}

// OpenSession implements [tenure.SessionStore]: a session that expires on
// the store's clock, ttl after its last keep-alive.
func (s *Store) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	return s.openSession(ctx, ttl, &s.seen)
}

func (s *Store) openSession(ctx context.Context, ttl time.Duration, sn *seen.Terms) (tenure.StoreSession, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: ttl %s must be positive", tenure.ErrInvalid, ttl)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return &session{s: s, sn: sn, ttl: ttl, expires: s.clock.Now().Add(ttl), grants: map[string]tenure.Lease{}}, nil
}

// liveLocked returns an error matching [tenure.ErrLost] if the session ended.
func (ss *session) liveLocked(ctx context.Context) error {
	if err := ss.s.check(ctx); err != nil {
		return err
	}
	if !ss.s.clock.Now().Before(ss.ends()) {
		return fmt.Errorf("%w: the session expired or was closed", tenure.ErrLost)
	}
	return nil
}

func (ss *session) Acquire(ctx context.Context, key, identity, value string) (tenure.Lease, error) {
	s := ss.s
	if l, ok := ss.mine(key, identity); ok {
		return l, nil
	}
	l, err := s.acquire(ctx, key, tenure.Claim{Identity: identity, TTL: ss.ttl, Value: value}, ss.sn)
	if err != nil {
		return l, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.liveLocked(ctx); err != nil {
		// Too late for this session: end the grant at once.
		if e, cerr := s.current(l, s.clock.Now()); cerr == nil {
			e.expires = time.Time{}
		}
		return tenure.Lease{}, err
	}
	if e, err := s.current(l, s.clock.Now()); err == nil {
		e.sess = ss
	}
	ss.grants[key] = l
	return l, nil
}

// mine returns the current grant of key if this session made it to
// identity.
func (ss *session) mine(key, identity string) (tenure.Lease, bool) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := ss.grants[key]
	if !ok || l.Identity != identity {
		return tenure.Lease{}, false
	}
	if e, err := s.current(l, s.clock.Now()); err != nil || e.sess != ss {
		return tenure.Lease{}, false
	}
	return l, true
}

func (ss *session) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := ss.liveLocked(ctx); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	ss.expires = now.Add(ss.ttl)
	var gone []tenure.Lease
	for key, l := range ss.grants {
		if e, err := s.current(l, now); err != nil || e.sess != ss {
			gone = append(gone, l)
			delete(ss.grants, key)
		}
	}
	return gone, nil
}

func (ss *session) Release(ctx context.Context, l tenure.Lease) error {
	s := ss.s
	s.mu.Lock()
	// Only this grant: a release of an older term of the key (retried
	// after a failure) must not forget a newer grant of the session,
	// which keep-alives would then keep alive without anyone holding it.
	if g, ok := ss.grants[l.Key]; ok && g.Term == l.Term && g.Token == l.Token {
		delete(ss.grants, l.Key)
	}
	s.mu.Unlock()
	return s.Release(ctx, l)
}

func (ss *session) Close(ctx context.Context) error {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	if ss.ended {
		return fmt.Errorf("%w: the session was closed", tenure.ErrLost)
	}
	ss.ended = true
	for key := range ss.grants {
		s.notifyLocked(key)
	}
	ss.grants = nil
	return nil
}

// AcquireBatch implements [tenure.BatchAcquirer]: the requests one after
// another, as Acquire. It lets tests drive a [tenure.Session]'s batches
// on the fake clock.
func (ss *session) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	res := make([]tenure.AcquireResult, len(reqs))
	for i, r := range reqs {
		res[i].Lease, res[i].Err = ss.Acquire(ctx, r.Key, r.Identity, r.Value)
	}
	return res
}
