package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// tamperOr returns the store's Tamper hook, or skips t when the store's test
// supplies none or lacks the func that need reports missing.
func (s *suite) tamperOr(t *testing.T, need func(*Tamper) bool, what string) *Tamper {
	t.Helper()
	if s.o.Tamper == nil || !need(s.o.Tamper) {
		t.Skipf("the store's test supplies no Tamper.%s hook (storetest.Options.Tamper)", what)
	}
	return s.o.Tamper
}

// watchSuperseded watches l's key on st and returns a func that waits for a
// delivery showing l superseded.
func (s *suite) watchSuperseded(t *testing.T, st tenure.Store, l tenure.Lease) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxFor(t))
	t.Cleanup(cancel)
	ch, err := st.Watch(ctx, l.Key)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	// The watch is set up once its first delivery shows the grant.
	first := time.NewTimer(s.o.Tolerance)
	defer first.Stop()
	for seen := false; !seen; {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatal("watch closed before it showed the grant")
			}
			seen = r.Holder == l.Identity && r.Term == l.Term
		case <-first.C:
			t.Fatalf("the watch did not show the grant of term %d within %s", l.Term, s.o.Tolerance)
		}
	}
	return func() {
		t.Helper()
		timeout := time.NewTimer(s.o.Tolerance)
		defer timeout.Stop()
		for {
			select {
			case r, ok := <-ch:
				if !ok {
					t.Fatalf("watch closed before delivering a record that supersedes term %d", l.Term)
				}
				if tenure.Superseded(l, r) != "" {
					return
				}
			case <-timeout.C:
				t.Fatalf("the holder's watch delivered no record superseding term %d within %s", l.Term, s.o.Tolerance)
			}
		}
	}
}

// renewNow renews l and returns when the Renew was sent: the holder's renew
// deadline is at most that plus l.TTL.
func renewNow(t *testing.T, st tenure.Store, l tenure.Lease) time.Time {
	t.Helper()
	sent := time.Now()
	if err := st.Renew(ctxFor(t), l); err != nil {
		t.Fatalf("Renew before tampering: %v", err)
	}
	return sent
}

// wantWaitCovers checks that a grant acquired (request sent at acqSent)
// after old vanished does not start its task before old's holder, whose
// last successful Renew was sent at renewSent, can have noticed.
func (s *suite) wantWaitCovers(t *testing.T, old, next tenure.Lease, renewSent, acqSent time.Time) {
	t.Helper()
	if next.Term <= old.Term {
		t.Fatalf("the grant after the old one vanished has term %d, not above the old term %d", next.Term, old.Term)
	}
	start, oldDeadline := acqSent.Add(next.Wait), renewSent.Add(old.TTL)
	if start.Before(oldDeadline) {
		t.Fatalf("the next grant has Wait %s: its task would start %s before the old holder's renew deadline (old TTL %s)",
			next.Wait, oldDeadline.Sub(start), old.TTL)
	}
	if limit := old.TTL + s.o.Tolerance + old.TTL/10 + time.Second; next.Wait > limit {
		t.Fatalf("the next grant has Wait %s, more than the old TTL %s needs", next.Wait, old.TTL)
	}
}

// grantDeletedFromOutside: the holder's grant is deleted with the
// backend's own client. The holder's Renew must fail with ErrLost, its
// watch must show the loss, and the next grant must carry a greater term
// and a Wait that covers the old holder's renew window.
func (s *suite) grantDeletedFromOutside(t *testing.T) {
	tm := s.tamperOr(t, func(tm *Tamper) bool { return tm.DeleteGrant != nil }, "DeleteGrant")
	a, b, l := s.granted(t, "alpha", s.long(10))
	key := l.Key
	superseded := s.watchSuperseded(t, a, l)
	renewSent := renewNow(t, a, l)
	tm.DeleteGrant(t, key)
	superseded()
	// Another candidate acquires before the holder renews again, as one
	// woken by the deletion does.
	l2 := s.takeOver(t, a, b, l, renewSent, "after its grant was deleted")
	// A release afterwards is an ordinary one: the next grant waits for nothing.
	l3 := mustAcquire(t, a, key, "alpha", s.o.TTL)
	if l3.Term <= l2.Term || l3.Wait != 0 {
		t.Fatalf("the grant after a release = term %d wait %s, want a term above %d and no wait", l3.Term, l3.Wait, l2.Term)
	}
}

// takeOver checks what follows the holder a losing its grant l from outside
// (its last renewal was sent at renewSent): b acquires l's key at once,
// told to wait out l's renew window; a's Renew and Release fail with
// ErrLost and leave b's grant alone; b then releases its grant, which
// takeOver returns. after ends the failure messages ("after ...").
func (s *suite) takeOver(t *testing.T, a, b tenure.Store, l tenure.Lease, renewSent time.Time, after string) tenure.Lease {
	t.Helper()
	acqSent := time.Now()
	l2 := mustAcquire(t, b, l.Key, "beta", s.long(5))
	s.wantWaitCovers(t, l, l2, renewSent, acqSent)
	wantStaleLost(t, a, l, "by the holder "+after)
	wantHolder(t, b, l.Key, "beta", l2.Term, "the old holder's calls")
	if err := b.Release(ctxFor(t), l2); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return l2
}

// grantOverwrittenFromOutside: the holder's grant is rewritten in place to
// name someone else. The holder's Renew and Release must fail with ErrLost,
// its watch must show the loss, and the key must not read as the old grant.
func (s *suite) grantOverwrittenFromOutside(t *testing.T) {
	tm := s.tamperOr(t, func(tm *Tamper) bool { return tm.OverwriteGrant != nil }, "OverwriteGrant")
	a, b, l := s.granted(t, "alpha", s.long(10))
	key := l.Key
	superseded := s.watchSuperseded(t, a, l)
	tm.OverwriteGrant(t, key, "mallory")
	superseded()
	wantStaleLost(t, a, l, "by the holder after its grant was overwritten")
	r := mustGet(t, b, key)
	// The record may be free: a store whose grant lives in the holder's
	// own session (ZooKeeper) ends that session once the holder saw the
	// grant overwritten.
	if why := tenure.Superseded(l, r); why == "" {
		t.Fatalf("Get after the grant was overwritten = %+v, still the old grant", r)
	}
}

// termCounterDeletedFromOutside: everything the store keeps for the key is
// deleted, term counter included. A handle that has seen the old term must
// never hand out a term not above it, and its grant must wait out the old
// holder's renew window.
func (s *suite) termCounterDeletedFromOutside(t *testing.T) {
	tm := s.tamperOr(t, func(tm *Tamper) bool { return tm.DeleteAll != nil }, "DeleteAll")
	a, b, l := s.granted(t, "alpha", s.long(10))
	key := l.Key
	// b learns of the grant as a campaigning candidate does.
	_, err := b.Acquire(ctxFor(t), key, "beta", s.o.TTL)
	wantHeld(t, err, "alpha", l.Term)
	superseded := s.watchSuperseded(t, a, l)
	renewSent := renewNow(t, a, l)
	tm.DeleteAll(t, key)
	superseded()
	s.takeOver(t, a, b, l, renewSent, "after the key's data was deleted")
	// Deleted again: the holder's own handle has seen l2 only if it
	// watched; it has seen l for certain.
	tm.DeleteAll(t, key)
	l3 := mustAcquire(t, a, key, "alpha", s.o.TTL)
	if l3.Term <= l.Term {
		t.Fatalf("after the key's data was deleted, the old holder's handle granted term %d, not above its own earlier term %d", l3.Term, l.Term)
	}
	if r := mustGet(t, a, key); r.Term < l3.Term {
		t.Fatalf("Get after the grant = %+v, term below the grant's %d", r, l3.Term)
	}
}
