package tenure_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// waiting is a store whose grants carry a Wait, as after a grant deleted
// from outside.
type waiting struct {
	*spy
	wait time.Duration
	last *atomic.Pointer[tenure.Lease] // the last grant
}

func (s waiting) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	l, err := s.spy.Acquire(ctx, key, id, ttl)
	l.Wait = s.wait
	if err == nil {
		s.last.Store(&l)
	}
	return l, err
}

func TestLeaseWaitDelaysTheTaskAndKeepsRenewing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		sp := &spy{Store: mem}
		const wait = 2500 * time.Millisecond // longer than the renew deadline
		e := newElector(t, config(waiting{sp, wait, new(atomic.Pointer[tenure.Lease])}, "a"))
		b := newBook()
		begun := time.Now()
		r := start(e, b.task("a", nil))
		synctest.Wait()
		if rec, _ := mem.Get(context.Background(), "job"); rec.Holder != "a" {
			t.Fatalf("holder = %q, want a (granted at once)", rec.Holder)
		}
		if st := e.Status(); st.Leading {
			t.Fatal("Status().Leading during the grant's Wait")
		}
		tm := <-b.began
		if d := tm.start.Sub(begun); d != wait {
			t.Fatalf("task started %s after Acquire, want the Wait, %s", d, wait)
		}
		if n := sp.renews.Load(); n < 3 {
			t.Fatalf("%d renewals during the Wait, want the grant kept alive (≥ 3)", n)
		}
		if st := e.Status(); !st.Leading || st.Term != tm.lease.Term {
			t.Fatalf("Status() = %+v after the Wait, want leader of term %d", st, tm.lease.Term)
		}
		r.stop()
	})
}

func TestLeaseWaitLostBeforeStartNeverRunsTheTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		sp := &spy{Store: mem}
		w := waiting{sp, 10 * ttl, new(atomic.Pointer[tenure.Lease])}
		e := newElector(t, config(w, "a"))
		var ran atomic.Bool
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Do(ctx, func(context.Context) error { ran.Store(true); return nil }) }()
		synctest.Wait()
		if rec, _ := mem.Get(context.Background(), "job"); rec.Holder != "a" {
			t.Fatalf("holder = %q, want a", rec.Holder)
		}
		// The grant ends behind the elector's back during the Wait.
		if err := mem.Release(context.Background(), *w.last.Load()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl) // past Do's jittered retry interval
		if ran.Load() {
			t.Fatal("the task ran although the grant was lost during its Wait")
		}
		if acq := sp.acquires.Load(); acq < 2 {
			t.Fatalf("%d acquisitions, want Do to campaign again after losing the grant during its Wait", acq)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v, want context.Canceled", err)
		}
		if ran.Load() {
			t.Fatal("the task ran although no grant outlived its Wait")
		}
	})
}

func TestSuperseded(t *testing.T) {
	l := tenure.Lease{Key: "k", Identity: "a", Term: 5}
	for _, c := range []struct {
		r    tenure.Record
		lost bool
	}{
		{tenure.Record{Holder: "a", Term: 5}, false},
		{tenure.Record{Holder: "b", Term: 4}, false}, // older news
		{tenure.Record{Holder: "", Term: 4}, false},
		{tenure.Record{Holder: "a", Term: 4}, false},
		{tenure.Record{Holder: "b", Term: 6}, true},
		{tenure.Record{Holder: "a", Term: 6}, true}, // a later grant to the same identity is another grant
		{tenure.Record{Holder: "", Term: 6}, true},
		{tenure.Record{Holder: "", Term: 5}, true},  // released, deleted or expired
		{tenure.Record{Holder: "b", Term: 5}, true}, // overwritten
	} {
		why := tenure.Superseded(l, c.r)
		if (why != "") != c.lost {
			t.Errorf("Superseded(term 5 of a, %+v) = %q, want lost=%v", c.r, why, c.lost)
		}
	}
}

func TestTermFollowsTheElectorsTimeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		e := newElector(t, config(mem, "a"))
		cfg := e.Config()
		got := make(chan []time.Time, 1)
		r := start(e, func(ctx context.Context) error {
			term, ok := tenure.TermFrom(ctx)
			if !ok {
				t.Error("TermFrom: not a leader context")
				return nil
			}
			if l, _ := tenure.LeaseFrom(ctx); l != term.Lease() {
				t.Errorf("TermFrom(ctx).Lease() = %+v, LeaseFrom = %+v", term.Lease(), l)
			}
			deadlines := []time.Time{term.Deadline()}
			for len(deadlines) < 4 {
				select {
				case <-term.Renewed():
					deadlines = append(deadlines, term.Deadline())
					if st := e.Status(); !st.Deadline.Equal(term.Deadline()) {
						t.Errorf("Term.Deadline %v, Status().Deadline %v", term.Deadline(), st.Deadline)
					}
				case <-ctx.Done():
					t.Error("leader context done while renewals succeed")
					return nil
				}
			}
			got <- deadlines
			<-ctx.Done()
			return nil
		})
		start := time.Now()
		deadlines := <-got
		if first := deadlines[0]; !first.Equal(start.Add(cfg.RenewDeadline)) {
			t.Errorf("first deadline %s after the start, want RenewDeadline %s", first.Sub(start), cfg.RenewDeadline)
		}
		for i := 1; i < len(deadlines); i++ {
			if !deadlines[i].After(deadlines[i-1]) {
				t.Errorf("deadline %d (%v) did not move past %v", i, deadlines[i], deadlines[i-1])
			}
			// Each is the renewal's send time plus RenewDeadline: never
			// further than RenewDeadline ahead of now.
			if time.Until(deadlines[i]) > cfg.RenewDeadline {
				t.Errorf("deadline %d is %s ahead, more than RenewDeadline", i, time.Until(deadlines[i]))
			}
		}
		r.stop()
	})
}

func TestTermFromOutsideALeaderContext(t *testing.T) {
	if term, ok := tenure.TermFrom(context.Background()); ok || term != nil {
		t.Fatalf("TermFrom(Background) = %v, %v; want nil, false", term, ok)
	}
}

// steppedClock is the bubble's clock plus an offset a test can step, as an
// administrator or NTP steps a wall clock; its timers are the bubble's.
type steppedClock struct{ off atomic.Int64 }

func (c *steppedClock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *steppedClock) NewTimer(d time.Duration) tenure.Timer {
	return tenure.SystemClock.NewTimer(d)
}

// hangingRenewals is a memory store whose renewals, once hang is set,
// block until their request's context ends; it notes when the last
// renewal that went through was sent, on the bubble's clock.
type hangingRenewals struct {
	*memory.Store
	hang     atomic.Bool
	lastSent atomic.Int64 // UnixNano
}

func (s *hangingRenewals) Renew(ctx context.Context, l tenure.Lease) error {
	if s.hang.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	s.lastSent.Store(time.Now().UnixNano())
	return s.Store.Renew(ctx, l)
}

// TestDeadlineHoldsWhenTheClockStepsBack: once a renewal went through, the
// leader context ends RenewDeadline after it was sent even if the clock is
// then stepped back and renewals hang: the deadline stays armed from when
// it was set, not read again from the clock at the next renewal. (A
// version with one timer for renewals and the deadline re-derived it at
// each renewal's start and cancelled the task the step's size late.)
func TestDeadlineHoldsWhenTheClockStepsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &hangingRenewals{Store: memory.New(nil)}
		clock := &steppedClock{}
		cfg := config(store, "a")
		cfg.Clock = clock
		e := newElector(t, cfg)
		b := newBook()
		r := start(e, b.task("a", nil))
		defer r.stop()
		<-b.began
		// Let a renewal or two go through, then hang the rest and step the
		// clock back by ten TTLs.
		time.Sleep(ttl)
		synctest.Wait()
		store.hang.Store(true)
		clock.off.Add(int64(-10 * ttl))
		tm := <-b.ended
		took := tm.done.Sub(time.Unix(0, store.lastSent.Load()))
		if rd := e.Config().RenewDeadline; took > rd {
			t.Errorf("the leader context ended %s after the last renewal that went through was sent; want at most the renew deadline, %s", took, rd)
		}
	})
}
