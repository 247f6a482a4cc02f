package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

func (s *suite) badInput(t *testing.T) {
	st := s.open(t)
	ctx := ctxFor(t)
	key, ttl := Key(t), s.o.TTL
	cases := []struct {
		name, key, id string
		ttl           time.Duration
	}{
		{"empty key", "", "a", ttl},
		{"empty identity", key, "", ttl},
		{"zero TTL", key, "a", 0},
		{"negative TTL", key, "a", -time.Second},
		{"over-long key", strings.Repeat("k", tenure.MaxKeyLen+1), "a", ttl},
		{"over-long identity", key, strings.Repeat("i", tenure.MaxIdentityLen+1), ttl},
		{"control character in key", key + "\x00", "a", ttl},
		{"invalid UTF-8 identity", key, "a\xff", ttl},
	}
	for _, c := range cases {
		_, err := st.Acquire(ctx, c.key, c.id, c.ttl)
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("Acquire with %s: got %v, want an error matching tenure.ErrInvalid", c.name, err)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("Acquire with %s: error %q spans several lines", c.name, err)
		}
	}
	if _, err := st.Get(ctx, ""); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("Get(\"\"): got %v, want ErrInvalid", err)
	}
	// Nothing was granted by the bad calls.
	if r := mustGet(t, st, key); r.Held() || r.Term != 0 {
		t.Errorf("after rejected calls, Get = %+v, want a never-granted key", r)
	}
	// The longest valid key works.
	long := key + strings.Repeat("x", tenure.MaxKeyLen-len(key))
	l := mustAcquire(t, st, long, "a", ttl)
	if err := st.Release(ctx, l); err != nil {
		t.Fatalf("Release of the longest key: %v", err)
	}
}

func (s *suite) getNeverGranted(t *testing.T) {
	st := s.open(t)
	r := mustGet(t, st, Key(t))
	if r.Held() || r.Term != 0 || r.Remaining != 0 {
		t.Fatalf("Get of a never-granted key = %+v, want no holder, term 0", r)
	}
}

func (s *suite) raceOneWinner(t *testing.T) {
	const n = 8
	key := Key(t)
	stores := make([]tenure.Store, n)
	for i := range stores {
		stores[i] = s.open(t)
	}
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		leases := make([]tenure.Lease, n)
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				leases[i], errs[i] = stores[i].Acquire(ctxFor(t), key, fmt.Sprintf("c%d", i), s.long(5))
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: both c%d and c%d acquired %q (terms %d, %d)", round, winner, i, key, leases[winner].Term, leases[i].Term)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody acquired: %v", round, errs)
		}
		for i, err := range errs {
			if i == winner {
				continue
			}
			var held *tenure.HeldError
			if !errors.As(err, &held) {
				t.Fatalf("round %d: loser c%d got %v, want *tenure.HeldError", round, i, err)
			}
			if held.Record.Holder != fmt.Sprintf("c%d", winner) && held.Record.Holder != "" {
				// A loser may have read the record before the winner's write
				// landed only if it saw it held by the winner.
				t.Fatalf("round %d: loser c%d was told the holder is %q, winner is c%d", round, i, held.Record.Holder, winner)
			}
		}
		if err := stores[winner].Release(ctxFor(t), leases[winner]); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

func (s *suite) heldErrorNamesHolder(t *testing.T) {
	_, b, l := s.granted(t, "alpha", s.long(5))
	key := l.Key
	_, err := b.Acquire(ctxFor(t), key, "beta", s.o.TTL)
	wantHeld(t, err, "alpha", l.Term)
	var held *tenure.HeldError
	errors.As(err, &held)
	if held.Record.Remaining <= 0 || held.Record.Remaining > s.long(5)+s.o.Tolerance {
		t.Fatalf("HeldError remaining = %s, want within (0, %s]", held.Record.Remaining, s.long(5))
	}
}

func (s *suite) sameIdentityIsHeld(t *testing.T) {
	_, b, l := s.granted(t, "same", s.long(5))
	key := l.Key
	_, err := b.Acquire(ctxFor(t), key, "same", s.o.TTL)
	wantHeld(t, err, "same", l.Term)
}

func (s *suite) releaseFreesAtOnce(t *testing.T) {
	a, b, l := s.granted(t, "alpha", s.long(10))
	key := l.Key
	if err := a.Release(ctxFor(t), l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	r := mustGet(t, b, key)
	if r.Held() || r.Term != l.Term || r.Remaining != 0 {
		t.Fatalf("Get after Release = %+v, want free with term %d kept", r, l.Term)
	}
	l2 := mustAcquire(t, b, key, "beta", s.o.TTL)
	if l2.Term <= l.Term {
		t.Fatalf("term after release went from %d to %d", l.Term, l2.Term)
	}
	wantStaleLost(t, a, l, "of a released lease")
	wantHolder(t, a, key, "beta", l2.Term, "stale calls")
}

func (s *suite) termsIncreaseAcrossRelease(t *testing.T) {
	st := s.open(t)
	key := Key(t)
	var last uint64
	for i := range 5 {
		l := mustAcquire(t, st, key, fmt.Sprintf("c%d", i%2), s.o.TTL)
		if l.Term <= last {
			t.Fatalf("grant %d has term %d, not above the previous %d", i, l.Term, last)
		}
		if r := mustGet(t, st, key); r.Holder != l.Identity || r.Term != l.Term || r.TTL != l.TTL ||
			r.Remaining <= 0 || r.Remaining > l.TTL {
			t.Fatalf("Get while held = %+v, want holder %q term %d ttl %s remaining in (0, ttl]", r, l.Identity, l.Term, l.TTL)
		}
		if i > 0 && l.Wait != 0 {
			t.Fatalf("grant %d after a release has Wait %s, want none", i, l.Wait)
		}
		last = l.Term
		if err := st.Release(ctxFor(t), l); err != nil {
			t.Fatalf("Release: %v", err)
		}
	}
}

func (s *suite) renewExtends(t *testing.T) {
	a, b := s.open(t), s.open(t)
	key, ttl := Key(t), s.o.TTL
	l := mustAcquire(t, a, key, "alpha", ttl)
	end := time.Now().Add(ttl*2 + ttl/2)
	for time.Now().Before(end) {
		time.Sleep(ttl / 4) // real time passing is the point of this test
		if err := a.Renew(ctxFor(t), l); err != nil {
			t.Fatalf("Renew at %s: %v", time.Until(end), err)
		}
		_, err := b.Acquire(ctxFor(t), key, "beta", ttl)
		wantHeld(t, err, "alpha", l.Term)
	}
	if r := mustGet(t, b, key); r.Holder != "alpha" || r.Term != l.Term {
		t.Fatalf("after renewals for 2.5 TTL, Get = %+v", r)
	}
}

func (s *suite) expiryWithinTolerance(t *testing.T) {
	a, b := s.open(t), s.open(t)
	key, ttl := Key(t), s.o.TTL
	sent := time.Now()
	l := mustAcquire(t, a, key, "alpha", ttl)
	returned := time.Now()
	poll := min(ttl/50, 20*time.Millisecond)
	for {
		l2, err := b.Acquire(ctxFor(t), key, "beta", ttl)
		done := time.Now()
		if err == nil {
			if l2.Wait != 0 {
				t.Fatalf("the grant after an expiry has Wait %s, want none: expiry already waited the TTL out", l2.Wait)
			}
			// The store received the request after sent, so the grant cannot
			// have lapsed before sent+TTL (1% allowed for clock rates).
			if early := sent.Add(ttl - ttl/100).Sub(done); early > 0 {
				t.Fatalf("key was granted again %s before the TTL had passed", early)
			}
			if late := done.Sub(returned.Add(ttl + s.o.Tolerance)); late > 0 {
				t.Fatalf("key was granted again %s later than TTL+tolerance", late)
			}
			break
		}
		if !errors.Is(err, tenure.ErrHeld) {
			t.Fatalf("Acquire while waiting for expiry: %v", err)
		}
		if time.Since(returned) > ttl+s.o.Tolerance+time.Second {
			t.Fatalf("grant still held %s after acquisition (TTL %s)", time.Since(returned), ttl)
		}
		time.Sleep(poll)
	}
	r := mustGet(t, a, key)
	if r.Holder != "beta" || r.Term <= l.Term {
		t.Fatalf("after takeover, Get = %+v, want beta with a term above %d", r, l.Term)
	}
}

func (s *suite) staleLeaseIsLost(t *testing.T) {
	a, b := s.open(t), s.open(t)
	key, ttl := Key(t), s.o.TTL
	old := mustAcquire(t, a, key, "alpha", ttl)
	// Let it expire, then have beta take over.
	var cur tenure.Lease
	deadline := time.Now().Add(ttl + s.o.Tolerance + time.Second)
	for {
		l, err := b.Acquire(ctxFor(t), key, "beta", s.long(10))
		if err == nil {
			cur = l
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no takeover after expiry: %v", err)
		}
		time.Sleep(ttl / 20)
	}
	if cur.Term <= old.Term {
		t.Fatalf("takeover term %d not above %d", cur.Term, old.Term)
	}
	wantStaleLost(t, a, old, "after takeover")
	wantHolder(t, a, key, "beta", cur.Term, "stale calls")
	if err := b.Renew(ctxFor(t), cur); err != nil {
		t.Fatalf("new holder's Renew after stale calls: %v", err)
	}
}

func (s *suite) forgedLeaseIsLost(t *testing.T) {
	a, b, l := s.granted(t, "alpha", s.long(10))
	key := l.Key
	forgeries := map[string]tenure.Lease{
		"other identity": {Key: key, Identity: "mallory", Term: l.Term, TTL: l.TTL, Token: l.Token},
		"older term":     {Key: key, Identity: l.Identity, Term: l.Term - 1, TTL: l.TTL, Token: l.Token},
		"newer term":     {Key: key, Identity: l.Identity, Term: l.Term + 1, TTL: l.TTL, Token: l.Token},
		"other key":      {Key: key + "-other", Identity: l.Identity, Term: l.Term, TTL: l.TTL, Token: l.Token},
	}
	for name, f := range forgeries {
		wantStaleLost(t, b, f, "with "+name)
	}
	wantHolder(t, b, key, "alpha", l.Term, "forged calls")
	if err := a.Renew(ctxFor(t), l); err != nil {
		t.Fatalf("holder's Renew after forged calls: %v", err)
	}
}

func (s *suite) keysAreIndependent(t *testing.T) {
	st := s.open(t)
	k1, k2 := Key(t)+"-1", Key(t)+"-2"
	l1 := mustAcquire(t, st, k1, "alpha", s.long(5))
	l2 := mustAcquire(t, st, k2, "beta", s.long(5))
	if err := st.Release(ctxFor(t), l1); err != nil {
		t.Fatal(err)
	}
	if r := mustGet(t, st, k2); r.Holder != "beta" || r.Term != l2.Term {
		t.Fatalf("releasing %q changed %q: %+v", k1, k2, r)
	}
}

func (s *suite) contextCancelled(t *testing.T) {
	st := s.open(t)
	key := Key(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	isCtx := func(err error) bool {
		return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	}
	if _, err := st.Acquire(ctx, key, "alpha", s.o.TTL); !isCtx(err) {
		t.Errorf("Acquire with a cancelled context: got %v, want context.Canceled", err)
	}
	if _, err := st.Get(ctx, key); !isCtx(err) {
		t.Errorf("Get with a cancelled context: got %v, want context.Canceled", err)
	}
	l := mustAcquire(t, st, key, "alpha", s.long(5))
	if err := st.Renew(ctx, l); !isCtx(err) {
		t.Errorf("Renew with a cancelled context: got %v, want context.Canceled", err)
	}
	if err := st.Release(ctx, l); !isCtx(err) {
		t.Errorf("Release with a cancelled context: got %v, want context.Canceled", err)
	}
	// A short deadline returns promptly.
	short, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	time.Sleep(2 * time.Millisecond)
	began := time.Now()
	_, err := st.Get(short, key)
	if !isCtx(err) {
		t.Errorf("Get past its deadline: got %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(began); d > s.o.Tolerance {
		t.Errorf("Get past its deadline took %s", d)
	}
}

func (s *suite) watch(t *testing.T) {
	a, b := s.open(t), s.open(t)
	key, ttl := Key(t), s.o.TTL
	ctx, cancel := context.WithCancel(ctxFor(t))
	ch, err := a.Watch(ctx, key)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	next := func(what string, want func(tenure.Record) bool, within time.Duration) tenure.Record {
		t.Helper()
		return Await(t, ch, within, what, func(r tenure.Record) bool {
			if r.Key != key {
				t.Fatalf("watch delivered key %q, want %q", r.Key, key)
			}
			return want(r)
		})
	}
	next("the initial free record", func(r tenure.Record) bool { return !r.Held() }, s.o.Tolerance)
	l := mustAcquire(t, b, key, "beta", s.long(10))
	next("the acquisition", func(r tenure.Record) bool { return r.Holder == "beta" && r.Term == l.Term }, s.o.Tolerance)
	if err := b.Release(ctxFor(t), l); err != nil {
		t.Fatal(err)
	}
	next("the release", func(r tenure.Record) bool { return !r.Held() && r.Term == l.Term }, s.o.Tolerance)
	l2 := mustAcquire(t, b, key, "gamma", ttl)
	next("the second acquisition", func(r tenure.Record) bool { return r.Holder == "gamma" && r.Term == l2.Term }, s.o.Tolerance)
	next("the expiry", func(r tenure.Record) bool { return !r.Held() }, ttl+s.o.Tolerance)
	cancel()
	for range ch { // closed once ctx is done
	}
}

func (s *suite) close(t *testing.T) {
	st := s.o.Open(t)
	key := Key(t)
	l := mustAcquire(t, st, key, "alpha", s.o.TTL)
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("Close again: %v, want nil (it does nothing)", err)
	}
	if _, err := st.Get(ctxFor(t), key); !errors.Is(err, tenure.ErrClosed) {
		t.Errorf("Get after Close: got %v, want ErrClosed", err)
	}
	if err := st.Renew(ctxFor(t), l); !errors.Is(err, tenure.ErrClosed) {
		t.Errorf("Renew after Close: got %v, want ErrClosed", err)
	}
	if _, err := st.Acquire(ctxFor(t), key, "alpha", s.o.TTL); !errors.Is(err, tenure.ErrClosed) {
		t.Errorf("Acquire after Close: got %v, want ErrClosed", err)
	}
	// Closed wins over a done context: an elector must learn that its
	// store is gone (a permanent error), not that one call was cancelled.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := st.Get(done, key); !errors.Is(err, tenure.ErrClosed) {
		t.Errorf("Get after Close with a cancelled context: got %v, want ErrClosed", err)
	}
	if err := st.Release(done, l); !errors.Is(err, tenure.ErrClosed) {
		t.Errorf("Release after Close with a cancelled context: got %v, want ErrClosed", err)
	}
}

func (s *suite) termsSurviveRestart(t *testing.T) {
	key := Key(t)
	st := s.o.Open(t)
	l := mustAcquire(t, st, key, "alpha", s.o.TTL)
	if err := st.Release(ctxFor(t), l); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	s.o.Restart(t)
	st2 := s.open(t)
	var l2 tenure.Lease
	deadline := time.Now().Add(s.o.TTL*2 + 10*time.Second)
	for {
		var err error
		if l2, err = st2.Acquire(ctxFor(t), key, "beta", s.o.TTL); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if l2.Term <= l.Term {
		t.Fatalf("term went from %d before the restart to %d after", l.Term, l2.Term)
	}
}
