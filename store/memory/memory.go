// Package memory is an in-process [tenure.Store]: leases live in a map and
// expire on the store's [tenure.Clock]. It coordinates goroutines of one
// process, and is the store of the elector's tests and deterministic
// simulations; it passes the conformance suite on every test run.
//
// It registers the URL scheme "memory": every Open of memory://NAME in one
// process returns a handle on the same store named NAME. Terms last as long
// as the process.
package memory

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
)

// Store is an in-memory lease store. The zero value is not usable; call New.
// All methods are safe for concurrent use and never block on anything but
// the store's mutex.
type Store struct {
	clock tenure.Clock

	mu       sync.Mutex
	keys     map[string]*entry
	watchers map[string]map[chan struct{}]struct{}
	tokens   uint64
	closed   bool
	done     chan struct{}

	seen seen.Terms // what calls on the Store itself (not a Handle) saw
}

type entry struct {
	holder  string
	term    uint64
	ttl     time.Duration
	expires time.Time // of the current or last grant
	token   string
	value   string // published with the current grant
	// released is set when the last grant ended by Release. A free entry
	// whose grant was neither released nor past its expiry vanished (see
	// [Store.Acquire]).
	released bool
	// sess is the session of a grant made in one; the grant then ends
	// when the session does, and expires is unused.
	sess *session
}

// ends returns when the current or last grant ends or ended.
func (e *entry) ends() time.Time {
	if e.sess != nil {
		return e.sess.ends()
	}
	return e.expires
}

var (
	_ tenure.Publisher    = (*Store)(nil)
	_ tenure.SessionStore = (*Store)(nil)
)

// New returns an empty store whose leases expire on clock (nil means
// [tenure.SystemClock]).
func New(clock tenure.Clock) *Store {
	if clock == nil {
		clock = tenure.SystemClock
	}
	return &Store{
		clock:    clock,
		keys:     map[string]*entry{},
		watchers: map[string]map[chan struct{}]struct{}{},
		done:     make(chan struct{}),
	}
}

// live reports whether e holds a live grant at now.
func (e *entry) live(now time.Time) bool { return e != nil && e.holder != "" && now.Before(e.ends()) }

func (s *Store) recordLocked(key string, now time.Time) tenure.Record {
	r := tenure.Record{Key: key}
	e := s.keys[key]
	if e == nil {
		return r
	}
	r.Term = e.term
	if e.live(now) {
		r.Holder, r.TTL, r.Remaining, r.Value = e.holder, e.ttl, e.ends().Sub(now), e.value
	}
	return r
}

// check is what every call checks first, under s.mu.
func (s *Store) check(ctx context.Context) error { return ctxerr.Usable(ctx, s.closed) }

// Acquire implements [tenure.Store]. A grant that follows one that ended
// neither by release nor by expiry (deleted through the test hooks) carries
// a Wait of the old grant's remaining time; a key whose entry is gone
// altogether, but which this Store (or Handle) saw granted, gets a term above
// the highest it saw and a Wait of that grant's TTL.
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.acquire(ctx, key, tenure.Claim{Identity: identity, TTL: ttl}, &s.seen)
}

// AcquireClaim implements [tenure.Publisher]: Acquire, keeping c.Value with
// the grant.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	return s.acquire(ctx, key, c, &s.seen)
}

func (s *Store) acquire(ctx context.Context, key string, c tenure.Claim, sn *seen.Terms) (tenure.Lease, error) {
	if err := tenure.CheckClaim(key, c); err != nil {
		return tenure.Lease{}, err
	}
	identity, ttl := c.Identity, c.TTL
	sent := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return tenure.Lease{}, err
	}
	now := s.clock.Now()
	e := s.keys[key]
	if e.live(now) {
		r := s.recordLocked(key, now)
		sn.Observe(key, r.Term, r.TTL)
		return tenure.Lease{}, &tenure.HeldError{Record: r}
	}
	floor := sn.Highest(key)
	var wait time.Duration
	switch {
	case e == nil && floor.Term > 0:
		wait = seen.Wait(floor.TTL + now.Sub(sent)) // the key's entry is gone: assume the worst
	case e != nil && e.term > 0 && !e.released && e.holder == "" && now.Before(e.ends()):
		wait = seen.Wait(e.ends().Sub(now) + now.Sub(sent)) // deleted before it expired
	}
	if e == nil {
		e = &entry{}
		s.keys[key] = e
	}
	s.tokens++
	e.holder, e.ttl, e.expires, e.released, e.value, e.sess = identity, ttl, now.Add(ttl), false, c.Value, nil
	e.term = max(e.term, floor.Term) + 1
	e.token = strconv.FormatUint(s.tokens, 10)
	s.notifyLocked(key)
	sn.Observe(key, e.term, ttl)
	return tenure.Lease{Key: key, Identity: identity, Term: e.term, TTL: ttl, Token: e.token, Wait: wait, Value: c.Value}, nil
}

// tamper changes key's entry the way a fault would, without a release
// (the test hooks in export_test.go); f returning nil deletes the entry.
func (s *Store) tamper(key string, f func(e *entry) *entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := f(s.keys[key]); e == nil {
		delete(s.keys, key)
	}
	s.notifyLocked(key)
}

// current returns the entry if l is its live grant.
func (s *Store) current(l tenure.Lease, now time.Time) (*entry, error) {
	e := s.keys[l.Key]
	switch {
	case e == nil || e.token != l.Token || e.term != l.Term || e.holder != l.Identity:
		return nil, fmt.Errorf("%w: key %q term %d was superseded", tenure.ErrLost, l.Key, l.Term)
	case !e.live(now):
		return nil, fmt.Errorf("%w: key %q term %d expired or was released", tenure.ErrLost, l.Key, l.Term)
	}
	return e, nil
}

// Renew implements [tenure.Store].
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	now := s.clock.Now()
	e, err := s.current(l, now)
	if err != nil {
		return err
	}
	if e.sess != nil {
		e.sess.expires = now.Add(e.ttl) // as a keep-alive of the grant's session
		return nil
	}
	e.expires = now.Add(e.ttl)
	return nil
}

// Release implements [tenure.Store].
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return err
	}
	e, err := s.current(l, s.clock.Now())
	if err != nil {
		return err
	}
	e.holder, e.token, e.ttl, e.expires, e.released, e.value, e.sess = "", "", 0, time.Time{}, true, "", nil
	s.notifyLocked(l.Key)
	return nil
}

// Get implements [tenure.Store].
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	return s.get(ctx, key, &s.seen)
}

func (s *Store) get(ctx context.Context, key string, sn *seen.Terms) (tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return tenure.Record{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.check(ctx); err != nil {
		return tenure.Record{}, err
	}
	return sn.Record(s.recordLocked(key, s.clock.Now())), nil
}

// Watch implements [tenure.Reader]. Besides acquisitions and releases, it
// reports an expiry when the store's clock passes it.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	return s.watch(ctx, key, &s.seen)
}

func (s *Store) watch(ctx context.Context, key string, sn *seen.Terms) (<-chan tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return nil, err
	}
	sig := make(chan struct{}, 1)
	s.mu.Lock()
	if err := s.check(ctx); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if s.watchers[key] == nil {
		s.watchers[key] = map[chan struct{}]struct{}{}
	}
	s.watchers[key][sig] = struct{}{}
	s.mu.Unlock()

	out := make(chan tenure.Record)
	go func() {
		defer func() {
			s.mu.Lock()
			delete(s.watchers[key], sig)
			s.mu.Unlock()
		}()
		tenure.Follow{
			Get:   func(ctx context.Context) (tenure.Record, error) { return s.get(ctx, key, sn) },
			Wake:  sig,
			Done:  s.done, // the watch ends when the store closes
			Clock: s.clock,
		}.Run(ctx, out)
	}()
	return out, nil
}

func (s *Store) notifyLocked(key string) {
	for sig := range s.watchers[key] {
		select {
		case sig <- struct{}{}:
		default:
		}
	}
}

// Close implements [tenure.Store]: later calls return [tenure.ErrClosed] and
// watches end.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	return nil
}

var (
	namedMu sync.Mutex
	named   = map[string]*Store{}
)

func init() {
	tenure.Register("memory", func(_ context.Context, u *url.URL) (tenure.Store, error) {
		namedMu.Lock()
		defer namedMu.Unlock()
		name := u.Host + u.Path
		s := named[name]
		if s == nil || s.isClosed() {
			s = New(nil)
			named[name] = s
		}
		return s, nil
	})
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
