package tenure_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
)

// board is a key's record that a test changes by hand, and counts reads of.
type board struct {
	mu    sync.Mutex
	r     tenure.Record
	reads int
	err   error
}

func (b *board) set(r tenure.Record) { b.mu.Lock(); b.r = r; b.mu.Unlock() }

func (b *board) get(context.Context) (tenure.Record, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	return b.r, b.err
}

func (b *board) count() int { b.mu.Lock(); defer b.mu.Unlock(); return b.reads }

// recv returns the next delivery, failing the test if there is none by the
// time every goroutine of the bubble is blocked.
func recv(t *testing.T, ch <-chan tenure.Record) tenure.Record {
	t.Helper()
	synctest.Wait()
	select {
	case r, ok := <-ch:
		if !ok {
			t.Fatal("the watch ended")
		}
		return r
	default:
		t.Fatal("no delivery")
	}
	return tenure.Record{}
}

func quiet(t *testing.T, ch <-chan tenure.Record) {
	t.Helper()
	synctest.Wait()
	select {
	case r, ok := <-ch:
		t.Fatalf("unexpected delivery %+v (open %t)", r, ok)
	default:
	}
}

func TestFollowDeliversChangesOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{r: tenure.Record{Key: "k", Holder: "a", Term: 2, Remaining: time.Second}}
		wake := make(chan struct{}, 1)
		ch := tenure.Follow{Get: b.get, Wake: wake}.Start(t.Context())
		if r := recv(t, ch); r.Holder != "a" || r.Term != 2 {
			t.Fatalf("first delivery %+v", r)
		}
		wake <- struct{}{} // nothing changed: no delivery
		quiet(t, ch)
		b.set(tenure.Record{Key: "k", Term: 1}) // older news: not delivered (unless it lasts)
		wake <- struct{}{}
		quiet(t, ch)
		b.set(tenure.Record{Key: "k", Holder: "b", Term: 3, Remaining: time.Second})
		wake <- struct{}{}
		if r := recv(t, ch); r.Holder != "b" || r.Term != 3 {
			t.Fatalf("after a change %+v", r)
		}
	})
}

// TestFollowDeliversOlderTermsThatLast: a term older than one delivered is
// stale news, and not delivered, while a newer one shows again within the
// last grant's TTL; once only older terms were shown for that TTL, they
// are the store's state (a term written from outside, a store restored
// from a backup) and the watch delivers them, re-reading by itself to
// confirm, instead of never delivering a record of that key again.
func TestFollowDeliversOlderTermsThatLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 2 * time.Second
		forged := tenure.Record{Key: "k", Holder: "a", Term: 1000000, TTL: ttl, Remaining: ttl}
		b := &board{r: forged}
		wake := make(chan struct{}, 1)
		ch := tenure.Follow{Get: b.get, Wake: wake, Announced: true}.Start(t.Context())
		if r := recv(t, ch); r.Term != forged.Term {
			t.Fatalf("first delivery %+v", r)
		}
		// A stale read, then the newer term again: nothing, ever.
		b.set(tenure.Record{Key: "k", Holder: "a", Term: 999999, TTL: ttl, Remaining: ttl})
		wake <- struct{}{}
		quiet(t, ch)
		b.set(forged)
		wake <- struct{}{}
		quiet(t, ch)
		time.Sleep(2 * ttl)
		quiet(t, ch)

		// The key rewritten with an older term, for good.
		real := tenure.Record{Key: "k", Holder: "b", Term: 2, TTL: ttl, Remaining: ttl}
		b.set(real)
		wake <- struct{}{}
		quiet(t, ch)
		start := time.Now()
		time.Sleep(ttl - time.Millisecond)
		quiet(t, ch)
		time.Sleep(10 * time.Millisecond)
		if r := recv(t, ch); r != real {
			t.Fatalf("after older terms were shown for a TTL: %+v, want %+v", r, real)
		}
		if took := time.Since(start); took < ttl {
			t.Errorf("the older term was delivered %s after it was first seen, before a TTL (%s)", took, ttl)
		}
		// And the watch goes on from there.
		b.set(tenure.Record{Key: "k", Holder: "c", Term: 3, TTL: ttl, Remaining: ttl})
		wake <- struct{}{}
		if r := recv(t, ch); r.Holder != "c" || r.Term != 3 {
			t.Fatalf("after the older term: %+v", r)
		}
	})
}

func TestFollowRereadsAtExpiry(t *testing.T) {
	for _, announced := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			b := &board{r: tenure.Record{Key: "k", Holder: "a", Term: 2, Remaining: time.Second}}
			ch := tenure.Follow{Get: b.get, Announced: announced}.Start(t.Context())
			recv(t, ch)
			b.set(tenure.Record{Key: "k", Term: 2}) // expired, unannounced
			time.Sleep(time.Second + 2*time.Millisecond)
			if announced {
				quiet(t, ch)
				if n := b.count(); n != 1 {
					t.Fatalf("announced expiries: %d reads, want 1", n)
				}
				return
			}
			if r := recv(t, ch); r.Held() || r.Term != 2 {
				t.Fatalf("after the expiry %+v", r)
			}
		})
	}
}

func TestFollowPollsAndPassesRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{r: tenure.Record{Key: "k", Term: 4}}
		recs := make(chan tenure.Record)
		ch := tenure.Follow{Get: b.get, Records: recs, Poll: time.Minute}.Start(t.Context())
		recv(t, ch)
		recs <- tenure.Record{Key: "k", Holder: "c", Term: 5}
		if r := recv(t, ch); r.Holder != "c" {
			t.Fatalf("decoded record not passed on: %+v", r)
		}
		b.set(tenure.Record{Key: "k", Term: 5})
		time.Sleep(time.Minute)
		if r := recv(t, ch); r.Held() {
			t.Fatalf("poll missed the release: %+v", r)
		}
		close(recs)
		synctest.Wait()
		if _, ok := <-ch; ok {
			t.Fatal("the watch outlived its records channel")
		}
	})
}

func TestFollowEndsOnReadError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{err: errors.New("unreachable")}
		ch := tenure.Follow{Get: b.get}.Start(t.Context())
		synctest.Wait()
		if _, ok := <-ch; ok {
			t.Fatal("a failed read did not end the watch")
		}
	})
}

func TestFollowInitialAndDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{r: tenure.Record{Key: "k", Term: 9}}
		done := make(chan struct{})
		first := tenure.Record{Key: "k", Holder: "a", Term: 8}
		ch := tenure.Follow{Get: b.get, Initial: &first, Done: done, Wake: make(chan struct{})}.Start(t.Context())
		if r := recv(t, ch); r.Holder != "a" || b.count() != 0 {
			t.Fatalf("first delivery %+v after %d reads, want the initial record and no read", r, b.count())
		}
		close(done)
		synctest.Wait()
		if _, ok := <-ch; ok {
			t.Fatal("the watch outlived Done")
		}
	})
}
