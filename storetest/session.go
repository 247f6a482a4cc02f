package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// sessions runs the cases of [tenure.SessionStore], for stores that
// implement it; Options.Sessions makes them required.
func (s *suite) sessions(t *testing.T) {
	st := s.open(t)
	if _, ok := st.(tenure.SessionStore); !ok {
		if s.o.Sessions {
			t.Fatalf("Options.Sessions is set but %T does not implement tenure.SessionStore", st)
		}
		t.Skipf("%T does not implement tenure.SessionStore", st)
	}
	t.Run("Grants", s.sessionGrants)
	t.Run("KeepAliveExtends", s.sessionKeepAliveExtends)
	t.Run("ReleaseOne", s.sessionReleaseOne)
	t.Run("CloseFreesAll", s.sessionCloseFreesAll)
	t.Run("Expires", s.sessionExpires)
	t.Run("ManyGrantsOneKeepAlive", s.sessionManyGrants)
	t.Run("GrantDeletedFromOutside", s.sessionGrantDeleted)
	t.Run("GrantOverwrittenFromOutside", s.sessionGrantOverwritten)
	t.Run("AcquireBatch", s.sessionBatch)
}

// OpenSession opens a session of st, which must be a [tenure.SessionStore],
// for ttl, failing t when it cannot; the session is closed at the end of
// the test.
func OpenSession(t testing.TB, st tenure.Store, ttl time.Duration) tenure.StoreSession {
	t.Helper()
	sst, ok := st.(tenure.SessionStore)
	if !ok {
		t.Fatalf("%T is not a tenure.SessionStore", st)
	}
	ss, err := sst.OpenSession(ctxFor(t), ttl)
	if err != nil {
		t.Fatalf("OpenSession(%s): %v", ttl, err)
	}
	t.Cleanup(func() { _ = ss.Close(context.Background()) })
	return ss
}

// AcquireIn acquires key in ss for id, publishing value, and fails t when
// that is refused or fails.
func AcquireIn(t testing.TB, ss tenure.StoreSession, key, id, value string) tenure.Lease {
	t.Helper()
	l, err := ss.Acquire(ctxFor(t), key, id, value)
	if err != nil {
		t.Fatalf("session Acquire(%q, %q): %v", key, id, err)
	}
	return l
}

// KeepAlive keeps ss alive once, failing t when that fails, and returns
// the grants it reports gone.
func KeepAlive(t testing.TB, ss tenure.StoreSession) []tenure.Lease {
	t.Helper()
	gone, err := ss.KeepAlive(ctxFor(t))
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	return gone
}

// mustAcquireIn is [AcquireIn] that also checks the grant's key, identity,
// value, term and the session's TTL.
func mustAcquireIn(t *testing.T, ss tenure.StoreSession, key, id, value string, ttl time.Duration) tenure.Lease {
	t.Helper()
	l := AcquireIn(t, ss, key, id, value)
	if l.Key != key || l.Identity != id || l.Term == 0 || l.TTL != ttl || l.Value != value {
		t.Fatalf("session Acquire(%q, %q) = %+v: want key, identity, value %q, the session's TTL %s and a term > 0",
			key, id, l, value, ttl)
	}
	return l
}

// sessionGrants: grants in a session are ordinary grants to everybody
// else: held, with their own terms and values, above earlier terms.
func (s *suite) sessionGrants(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ttl := s.long(10)
	k1, k2 := Key(t), Key(t)
	plain := mustAcquire(t, b, k1, "beta", s.o.TTL)
	if err := b.Release(ctxFor(t), plain); err != nil {
		t.Fatal(err)
	}
	ss := OpenSession(t, a, ttl)
	l1 := mustAcquireIn(t, ss, k1, "alpha", "10.0.0.1:80", ttl)
	l2 := mustAcquireIn(t, ss, k2, "alpha", "", ttl)
	if l1.Term <= plain.Term {
		t.Fatalf("the session grant of %q has term %d, not above the earlier %d", k1, l1.Term, plain.Term)
	}
	for _, l := range []tenure.Lease{l1, l2} {
		_, err := b.Acquire(ctxFor(t), l.Key, "beta", s.o.TTL)
		wantHeld(t, err, "alpha", l.Term)
		if r := mustGet(t, b, l.Key); r.Holder != "alpha" || r.Term != l.Term || r.Value != l.Value ||
			r.Remaining <= 0 || r.Remaining > ttl {
			t.Fatalf("Get of a session grant = %+v, want holder alpha term %d value %q remaining in (0, %s]", r, l.Term, l.Value, ttl)
		}
	}
	_, err := ss.Acquire(ctxFor(t), k1, "gamma", "")
	wantHeld(t, err, "alpha", l1.Term)
	if _, err := ss.Acquire(ctxFor(t), "", "alpha", ""); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("session Acquire of an empty key: got %v, want ErrInvalid", err)
	}
	if _, err := ss.Acquire(ctxFor(t), Key(t), "alpha", "bad\x00value"); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("session Acquire with a bad value: got %v, want ErrInvalid", err)
	}
	if gone := KeepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive with every grant current reported gone: %+v", gone)
	}
}

// sessionKeepAliveExtends: keep-alives keep every grant of the session
// for longer than its TTL; without them the grants expire together.
func (s *suite) sessionKeepAliveExtends(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ttl := s.o.TTL
	ss := OpenSession(t, a, ttl)
	k1, k2 := Key(t), Key(t)
	l1 := mustAcquireIn(t, ss, k1, "alpha", "", ttl)
	l2 := mustAcquireIn(t, ss, k2, "alpha", "", ttl)
	end := time.Now().Add(ttl*2 + ttl/2)
	for time.Now().Before(end) {
		time.Sleep(ttl / 4) // real time passing is the point of this test
		if gone := KeepAlive(t, ss); len(gone) != 0 {
			t.Fatalf("KeepAlive reported gone: %+v", gone)
		}
		for _, l := range []tenure.Lease{l1, l2} {
			_, err := b.Acquire(ctxFor(t), l.Key, "beta", ttl)
			wantHeld(t, err, "alpha", l.Term)
		}
	}
	last := time.Now()
	for _, l := range []tenure.Lease{l1, l2} {
		s.waitAcquirable(t, b, l.Key, last.Add(ttl+s.o.Tolerance), "a session grant without keep-alives")
	}
}

// waitAcquirable polls until b acquires key, failing past by.
func (s *suite) waitAcquirable(t *testing.T, b tenure.Store, key string, by time.Time, what string) tenure.Lease {
	t.Helper()
	for {
		l, err := b.Acquire(ctxFor(t), key, "beta", s.long(5))
		if err == nil {
			return l
		}
		if !errors.Is(err, tenure.ErrHeld) {
			t.Fatalf("Acquire of %s: %v", what, err)
		}
		if time.Now().After(by) {
			t.Fatalf("%s still held %s after it should have ended", what, time.Since(by))
		}
		time.Sleep(20 * time.Millisecond) // polling a real server's clock
	}
}

// twoInSession opens a handle with a long session holding two grants to
// "alpha", and another handle b.
func (s *suite) twoInSession(t *testing.T) (b tenure.Store, ss tenure.StoreSession, l1, l2 tenure.Lease) {
	t.Helper()
	a := s.open(t)
	b = s.open(t)
	ttl := s.long(10)
	ss = OpenSession(t, a, ttl)
	l1 = mustAcquireIn(t, ss, Key(t), "alpha", "", ttl)
	l2 = mustAcquireIn(t, ss, Key(t), "alpha", "", ttl)
	return b, ss, l1, l2
}

// sessionReleaseOne: releasing one grant frees its key at once and leaves
// the others held.
func (s *suite) sessionReleaseOne(t *testing.T) {
	b, ss, l1, l2 := s.twoInSession(t)
	k1, k2 := l1.Key, l2.Key
	if err := ss.Release(ctxFor(t), l1); err != nil {
		t.Fatalf("session Release: %v", err)
	}
	l3 := mustAcquire(t, b, k1, "beta", s.o.TTL)
	if l3.Term <= l1.Term || l3.Wait != 0 {
		t.Fatalf("the grant after a session release = term %d wait %s, want a term above %d and no wait", l3.Term, l3.Wait, l1.Term)
	}
	wantLost(t, ss.Release(ctxFor(t), l1), "a second session Release")
	if gone := KeepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive after a release reported gone: %+v", gone)
	}
	_, err := b.Acquire(ctxFor(t), k2, "beta", s.o.TTL)
	wantHeld(t, err, "alpha", l2.Term)
	if r := mustGet(t, b, k1); r.Holder != "beta" || r.Term != l3.Term {
		t.Fatalf("the released lease's session changed the record: %+v", r)
	}
}

// sessionCloseFreesAll: closing the session frees every key in it at
// once, tells watchers, and later keep-alives fail.
func (s *suite) sessionCloseFreesAll(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ttl := s.long(10)
	ss := OpenSession(t, a, ttl)
	keys := []string{Key(t), Key(t), Key(t)}
	var leases []tenure.Lease
	for _, k := range keys {
		leases = append(leases, mustAcquireIn(t, ss, k, "alpha", "", ttl))
	}
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	ch, err := b.Watch(ctx, keys[0])
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	Await(t, ch, s.o.Tolerance, "the session grant", func(r tenure.Record) bool { return r.Holder == "alpha" })
	if err := ss.Close(ctxFor(t)); err != nil {
		t.Fatalf("session Close: %v", err)
	}
	AwaitEnd(t, ch, leases[0], s.o.Tolerance, "the session's close")
	for _, l := range leases {
		l2 := s.waitAcquirable(t, b, l.Key, time.Now().Add(s.o.Tolerance), "a grant of a closed session")
		if l2.Term <= l.Term {
			t.Fatalf("the grant after the session closed has term %d, not above %d", l2.Term, l.Term)
		}
	}
	if _, err := ss.KeepAlive(ctxFor(t)); !errors.Is(err, tenure.ErrLost) && !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("KeepAlive after Close: got %v, want ErrLost or ErrClosed", err)
	}
}

// sessionExpires: a session without keep-alives expires, and its
// KeepAlive then says so.
func (s *suite) sessionExpires(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ttl := s.o.TTL
	ss := OpenSession(t, a, ttl)
	l := mustAcquireIn(t, ss, Key(t), "alpha", "", ttl)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	ch, err := b.Watch(ctx, l.Key)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	Await(t, ch, s.o.Tolerance, "the session grant", func(r tenure.Record) bool { return r.Holder == "alpha" })
	AwaitEnd(t, ch, l, ttl+s.o.Tolerance, "the session's expiry")
	s.waitAcquirable(t, b, l.Key, time.Now().Add(s.o.Tolerance), "a grant of an expired session")
	// Well past the session's end, so that even a store that judges expiry
	// coarsely has ended it.
	time.Sleep(s.o.Tolerance)
	if _, err := ss.KeepAlive(ctxFor(t)); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive of an expired session: got %v, want ErrLost", err)
	}
	if _, err := ss.Acquire(ctxFor(t), Key(t), "alpha", ""); err == nil {
		t.Fatal("Acquire in an expired session succeeded")
	}
}

// sessionManyGrants: one keep-alive keeps many grants.
func (s *suite) sessionManyGrants(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ttl := s.long(10)
	ss := OpenSession(t, a, ttl)
	const n = 200
	leases := make([]tenure.Lease, n)
	for i := range leases {
		leases[i] = mustAcquireIn(t, ss, fmt.Sprintf("%s-%d", Key(t), i), "alpha", "", ttl)
	}
	if gone := KeepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive of %d current grants reported %d gone", n, len(gone))
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if r := mustGet(t, b, leases[i].Key); r.Holder != "alpha" || r.Term != leases[i].Term {
			t.Fatalf("grant %d after the keep-alive: %+v", i, r)
		}
	}
}

// sessionGrantDeleted: a session grant deleted with the backend's own
// client is reported gone by the next keep-alive (and only it), and the
// next holder's grant waits out the session's renew window.
func (s *suite) sessionGrantDeleted(t *testing.T) {
	tm := s.tamperOr(t, func(tm *Tamper) bool { return tm.DeleteGrant != nil }, "DeleteGrant")
	b, ss, l1, l2 := s.twoInSession(t)
	k1, k2 := l1.Key, l2.Key
	sent := time.Now()
	KeepAlive(t, ss)
	tm.DeleteGrant(t, k1)
	acqSent := time.Now()
	next := mustAcquire(t, b, k1, "beta", s.o.TTL)
	s.wantWaitCovers(t, l1, next, sent, acqSent)
	gone := KeepAlive(t, ss)
	if len(gone) != 1 || gone[0].Key != k1 || gone[0].Term != l1.Term {
		t.Fatalf("KeepAlive after %q was deleted reported gone %+v, want just its grant of term %d", k1, gone, l1.Term)
	}
	if gone := KeepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("a second KeepAlive reported gone again: %+v", gone)
	}
	if r := mustGet(t, b, k2); r.Holder != "alpha" || r.Term != l2.Term {
		t.Fatalf("the other grant after the deletion: %+v", r)
	}
	if r := mustGet(t, b, k1); r.Holder != "beta" || r.Term != next.Term {
		t.Fatalf("the session changed the new holder's record: %+v", r)
	}
}

// sessionGrantOverwritten: a session grant rewritten in place to name
// someone else is reported gone by the next keep-alive, and the session
// neither renews nor releases the new holder's grant.
func (s *suite) sessionGrantOverwritten(t *testing.T) {
	tm := s.tamperOr(t, func(tm *Tamper) bool { return tm.OverwriteGrant != nil }, "OverwriteGrant")
	b, ss, l1, l2 := s.twoInSession(t)
	tm.OverwriteGrant(t, l1.Key, "mallory")
	gone := KeepAlive(t, ss)
	if len(gone) != 1 || gone[0].Key != l1.Key || gone[0].Term != l1.Term {
		t.Fatalf("KeepAlive after %q was overwritten reported gone %+v, want just its grant of term %d", l1.Key, gone, l1.Term)
	}
	wantLost(t, ss.Release(ctxFor(t), l1), "the session's Release of an overwritten grant")
	if r := mustGet(t, b, l1.Key); r.Holder != "mallory" {
		t.Fatalf("the session changed the overwritten record: %+v", r)
	}
	if r := mustGet(t, b, l2.Key); r.Holder != "alpha" || r.Term != l2.Term {
		t.Fatalf("the other grant after the overwrite: %+v", r)
	}
}

// sessionBatch: a [tenure.BatchAcquirer] answers each request of a batch
// as Acquire would, in order: free keys granted with their own terms and
// values, a held key refused with its holder, a bad request refused on
// its own; the grants live with the session like any other.
func (s *suite) sessionBatch(t *testing.T) {
	a, b := s.open(t), s.open(t)
	ttl := s.long(10)
	ss := OpenSession(t, a, ttl)
	ba, ok := ss.(tenure.BatchAcquirer)
	if !ok {
		t.Skipf("%T does not implement tenure.BatchAcquirer", ss)
	}
	held := mustAcquire(t, b, Key(t)+"-held", "beta", s.o.TTL)
	const n = 50
	reqs := make([]tenure.AcquireRequest, 0, n+2)
	earlier := map[string]uint64{} // every other key was granted and released before
	for i := range n {             // out of key order: the store may sort, the answers may not move
		k := fmt.Sprintf("%s-%02d", Key(t), n-i)
		reqs = append(reqs, tenure.AcquireRequest{Key: k, Identity: "alpha", Value: fmt.Sprint(i)})
		if i%2 == 0 {
			l := mustAcquire(t, b, k, "beta", s.o.TTL)
			if err := b.Release(ctxFor(t), l); err != nil {
				t.Fatal(err)
			}
			earlier[k] = l.Term
		}
	}
	reqs = append(reqs, tenure.AcquireRequest{Key: held.Key, Identity: "alpha"}, tenure.AcquireRequest{Key: "", Identity: "alpha"})
	res := ba.AcquireBatch(ctxFor(t), reqs)
	if len(res) != len(reqs) {
		t.Fatalf("AcquireBatch of %d requests returned %d results", len(reqs), len(res))
	}
	for i, r := range res[:n] {
		q := reqs[i]
		if r.Err != nil || r.Lease.Key != q.Key || r.Lease.Identity != "alpha" || r.Lease.Value != q.Value || r.Lease.Term <= earlier[q.Key] || r.Lease.TTL != ttl {
			t.Fatalf("batch result %d for %+v = %+v, %v: want its key granted with its value, the session's TTL and a term above %d",
				i, q, r.Lease, r.Err, earlier[q.Key])
		}
		_, err := b.Acquire(ctxFor(t), q.Key, "beta", s.o.TTL)
		wantHeld(t, err, "alpha", r.Lease.Term)
	}
	wantHeld(t, res[n].Err, "beta", held.Term)
	if !errors.Is(res[n+1].Err, tenure.ErrInvalid) {
		t.Fatalf("batch result for an empty key: %v, want ErrInvalid", res[n+1].Err)
	}
	if gone := KeepAlive(t, ss); len(gone) != 0 {
		t.Fatalf("KeepAlive after a batch reported gone: %+v", gone)
	}
	if err := ss.Release(ctxFor(t), res[0].Lease); err != nil {
		t.Fatalf("Release of a batch grant: %v", err)
	}
	mustAcquire(t, b, res[0].Lease.Key, "beta", s.o.TTL)
}
