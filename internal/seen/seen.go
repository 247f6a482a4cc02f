// Package seen is what a store handle remembers about the grants it has
// seen, so that it can refuse to hand out a term that went backwards (a term
// counter deleted or evicted behind tenure's back) and can tell that a grant
// vanished when the store's own record of it is gone.
package seen

import (
	"math"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
)

// Grant is the highest term a handle has seen for a key and the TTL of the
// grant that carried it (0 when the handle saw the term only on a free key).
type Grant struct {
	Term uint64
	TTL  time.Duration
}

// Terms remembers, per key, the highest term seen and its grant's TTL.
// The zero value is ready to use; it is safe for concurrent use. It grows by
// one small entry per key the handle touched, for the handle's lifetime.
type Terms struct {
	mu sync.Mutex
	m  map[string]Grant
}

// Observe records that key had term, held with ttl (0 for a free key or an
// unknown TTL). A term below the highest seen is ignored; the same term
// keeps the larger TTL.
func (t *Terms) Observe(key string, term uint64, ttl time.Duration) {
	if term == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]Grant{}
	}
	g := t.m[key]
	switch {
	case term > g.Term:
		t.m[key] = Grant{Term: term, TTL: ttl}
	case term == g.Term && ttl > g.TTL:
		g.TTL = ttl
		t.m[key] = g
	}
}

// Highest returns the highest term seen for key and its grant's TTL; zero
// if none.
func (t *Terms) Highest(key string) Grant {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[key]
}

// Margin is added to every Wait for the difference between the clocks'
// rates and for the time a reply takes to travel.
func Margin(d time.Duration) time.Duration { return d/50 + 20*time.Millisecond }

// Wait is the [tenure.Lease] Wait of a grant that follows one that ended
// without its holder's release or expiry, when that holder's renew window
// still open is at most remaining (the previous grant's TTL when the store
// cannot know better), judged at the moment the Acquire was sent. It
// saturates at the largest Duration rather than overflow: a window read
// from a record written from outside can be anything.
func Wait(remaining time.Duration) time.Duration {
	if remaining <= 0 {
		return 0
	}
	return AddSat(remaining, Margin(remaining))
}

// AddSat is a+b for non-negative a and b, at most the largest Duration.
func AddSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// WaitSince is [Wait] for a window judged by the store somewhere between
// sent, when the caller entered Acquire, and now: Lease.Wait counts from
// when Acquire was sent, and everything before the store's judgement (a
// first connection, a migration, queueing, the request's travel) may have
// passed, so it is added.
func WaitSince(sent time.Time, window time.Duration) time.Duration {
	if window <= 0 {
		return 0
	}
	return Wait(AddSat(window, max(time.Since(sent), 0)))
}

// Record observes r and returns it with, if the key is free, the highest
// term seen as its term: a key whose data was deleted reads as free at the
// last term this handle knows of, so a holder watching it sees its grant
// gone ([tenure.Superseded]) rather than older news. A negative TTL or
// Remaining, which only a record written from outside carries, reads as 0.
func (t *Terms) Record(r tenure.Record) tenure.Record {
	r.TTL, r.Remaining = max(r.TTL, 0), max(r.Remaining, 0)
	t.Observe(r.Key, r.Term, r.TTL)
	if !r.Held() {
		r.Term = max(r.Term, t.Highest(r.Key).Term)
	}
	return r
}

// Next returns the term after the highest of terms, and false when that
// highest is the largest uint64: a term written there from outside, past
// which no greater term exists. A store must then refuse to grant rather
// than hand out the wrapped term 0.
func Next(terms ...uint64) (uint64, bool) {
	var hi uint64
	for _, t := range terms {
		hi = max(hi, t)
	}
	if hi == math.MaxUint64 {
		return 0, false
	}
	return hi + 1, true
}
