package faultstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
)

const ttl = time.Second

// nothingYet fails t if ch has a value once every goroutine of the bubble
// is blocked: what says what the value would mean.
func nothingYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case v := <-ch:
		t.Fatalf("%s: %+v", what, v)
	default:
	}
}

func held(t *testing.T, s tenure.Store) bool {
	t.Helper()
	r, err := s.Get(context.Background(), "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return r.Held()
}

func TestFailBeforeIsNotApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Rates: faultstore.Rates{FailBefore: 1}})
		s := faultstore.Wrap(mem, f)
		_, err := s.Acquire(t.Context(), "k", "a", ttl)
		if !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("Acquire error = %v, want ErrInjected", err)
		}
		if held(t, mem) {
			t.Fatal("a call that failed before reaching the store was applied")
		}
	})
}

func TestFailAfterIsApplied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Rates: faultstore.Rates{FailAfter: 1, Ops: faultstore.OpAcquire}})
		s := faultstore.Wrap(mem, f)
		_, err := s.Acquire(t.Context(), "k", "a", ttl)
		if !errors.Is(err, faultstore.ErrInjected) || errors.Is(err, tenure.ErrLost) {
			t.Fatalf("Acquire error = %v, want ErrInjected and not ErrLost", err)
		}
		if !held(t, mem) {
			t.Fatal("an ambiguous failure was not applied at the store")
		}
		if got := f.Counts()["fail-after"]; got != 1 {
			t.Fatalf("fail-after count = %d, want 1", got)
		}
		// Ops limits the faults: Get is not affected.
		if _, err := s.Get(t.Context(), "k"); err != nil {
			t.Fatalf("Get not in Ops failed: %v", err)
		}
	})
}

func TestLateReplyAfterDeadlineIsAppliedButLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Rates: faultstore.Rates{DelayAfter: 1, MaxDelay: time.Hour}, Seed: 1})
		s := faultstore.Wrap(mem, f)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := s.Acquire(ctx, "k", "a", ttl)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire error = %v, want deadline exceeded", err)
		}
		if waited := time.Since(start); waited != 10*time.Millisecond {
			t.Fatalf("late reply returned after %s, want exactly the ctx deadline 10ms", waited)
		}
		if !held(t, mem) {
			t.Fatal("the late call was not applied")
		}
	})
}

func TestDelayBeforeWaitsOnTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Rates: faultstore.Rates{DelayBefore: 1, MaxDelay: time.Second}, Seed: 7})
		s := faultstore.Wrap(mem, f)
		start := time.Now()
		if _, err := s.Acquire(t.Context(), "k", "a", ttl); err != nil {
			t.Fatal(err)
		}
		waited := time.Since(start)
		if waited <= 0 || waited >= time.Second {
			t.Fatalf("delay = %s, want in (0, 1s)", waited)
		}
		r, _ := mem.Get(t.Context(), "k")
		if r.Remaining != ttl {
			t.Fatalf("lease granted before the delay ended: remaining %s", r.Remaining)
		}
	})
}

func TestPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{})
		s := faultstore.Wrap(mem, f)

		f.Partition(faultstore.FailFast)
		if _, err := s.Get(t.Context(), "k"); !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("fail-fast partition: Get error = %v", err)
		}

		f.Partition(faultstore.Hang)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		if _, err := s.Acquire(ctx, "k", "a", ttl); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("hanging partition: Acquire error = %v", err)
		}
		if time.Since(start) != time.Second {
			t.Fatalf("hung for %s, want until the ctx deadline", time.Since(start))
		}
		if held(t, mem) {
			t.Fatal("a call hung in a partition was applied")
		}

		// Healing lets a hanging call through.
		done := make(chan error, 1)
		go func() { _, err := s.Acquire(t.Context(), "k", "a", ttl); done <- err }()
		nothingYet(t, done, "call returned during the partition")
		f.Heal()
		if err := <-done; err != nil {
			t.Fatalf("call after heal: %v", err)
		}
	})
}

func TestPauseResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{})
		s := faultstore.Wrap(mem, f)
		f.Pause()
		done := make(chan error, 1)
		go func() { _, err := s.Acquire(t.Context(), "k", "a", ttl); done <- err }()
		time.Sleep(time.Minute)
		synctest.Wait()
		if held(t, mem) {
			t.Fatal("a paused call reached the store")
		}
		f.Resume()
		if err := <-done; err != nil {
			t.Fatalf("resumed call: %v", err)
		}
		if !held(t, mem) {
			t.Fatal("the resumed call was not applied")
		}
	})
}

func TestWrapKeepsAbilities(t *testing.T) {
	mem := memory.New(nil)
	f := faultstore.New(faultstore.Plan{})
	if lo, hi := tenure.TTLBounds(faultstore.Wrap(mem, f)); lo != tenure.MinTTL || hi != tenure.MaxTTL {
		t.Errorf("wrapped memory store: TTL bounds %s..%s, want the defaults", lo, hi)
	}
	inner := ranged{mem}
	w := faultstore.Wrap(inner, f)
	if lo, hi := tenure.TTLBounds(w); lo != 2*time.Second || hi != time.Minute {
		t.Errorf("wrapped ranged store: TTL bounds %s..%s, want 2s..1m", lo, hi)
	}
	if id, ttl := w.(tenure.Defaulter).Defaults(); id != "me" || ttl != 3*time.Second {
		t.Errorf("wrapped store's defaults %q %s, want \"me\" 3s", id, ttl)
	}
	if !w.(tenure.PollingWatcher).WatchPolls() {
		t.Error("wrapping a polling watcher hid it")
	}
	if _, err := faultstore.Wrap(faultstore.PollOnly(mem), f).Watch(t.Context(), "k"); !errors.Is(err, faultstore.ErrNoWatch) {
		t.Errorf("wrapped PollOnly store's Watch: %v, want ErrNoWatch", err)
	}
	if _, ok := faultstore.Wrap(faultstore.PollOnly(mem), f).(tenure.Publisher); !ok {
		t.Error("wrapping a Publisher (through PollOnly) hid the ability")
	}
	if _, ok := w.(tenure.Publisher); ok {
		t.Error("wrapping a store that cannot publish made a Publisher")
	}
	if _, ok := faultstore.PollOnly(faultstore.Wrap(mem, f)).(tenure.SessionStore); !ok {
		t.Error("PollOnly hid the SessionStore ability")
	}
	if _, ok := faultstore.Wrap(mem, f).(tenure.SessionStore); !ok {
		t.Error("wrapping a SessionStore hid the ability")
	}
	if _, ok := w.(tenure.SessionStore); ok {
		t.Error("wrapping a store without sessions made a SessionStore")
	}
}

func TestFailBeforeIsNotAppliedToClaims(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Rates: faultstore.Rates{FailBefore: 1}})
		s := faultstore.Wrap(mem, f).(tenure.Publisher)
		_, err := s.AcquireClaim(t.Context(), "k", tenure.Claim{Identity: "a", TTL: ttl, Value: "v"})
		if !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("AcquireClaim error = %v, want ErrInjected", err)
		}
		if held(t, mem) {
			t.Fatal("a claim that failed before reaching the store was applied")
		}
	})
}

// ranged is a store with every optional ability.
type ranged struct{ tenure.Store }

func (ranged) TTLRange() (lo, hi time.Duration)               { return 2 * time.Second, time.Minute }
func (ranged) Defaults() (identity string, ttl time.Duration) { return "me", 3 * time.Second }
func (ranged) WatchPolls() bool                               { return true }

func TestPartitionCutsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{})
		s := faultstore.Wrap(mem, f)
		ch, err := s.Watch(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if r := <-ch; r.Held() {
			t.Fatalf("initial record %+v", r)
		}
		f.Pause()
		if _, err := mem.Acquire(t.Context(), "k", "a", ttl); err != nil {
			t.Fatal(err)
		}
		nothingYet(t, ch, "delivery during a pause")
		f.Resume()
		if r := <-ch; r.Holder != "a" {
			t.Fatalf("delivery after resume = %+v, want holder a", r)
		}
		f.Partition(faultstore.Hang)
		if r, ok := <-ch; ok {
			t.Fatalf("watch still open in a partition, got %+v", r)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := s.Watch(ctx, "k"); err == nil {
			t.Fatal("Watch succeeded during a partition")
		}
	})
}

// decisions runs n Renew calls through a fresh plan and returns the faults
// injected, in order.
func decisions(seed uint64, n int) []string {
	var got []string
	f := faultstore.New(faultstore.Plan{
		Seed:    seed,
		Rates:   faultstore.Rates{FailBefore: 0.3, FailAfter: 0.3, DelayBefore: 0.3, DelayAfter: 0.3, MaxDelay: time.Millisecond},
		OnFault: func(op faultstore.Op, what string) { got = append(got, what) },
	})
	s := faultstore.Wrap(memory.New(nil), f)
	for range n {
		_ = s.Renew(context.Background(), tenure.Lease{Key: "k", Identity: "a", Term: 1})
	}
	return got
}

func TestSameSeedSameDecisions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b, c := decisions(42, 200), decisions(42, 200), decisions(43, 200)
		if len(a) == 0 {
			t.Fatal("no faults injected at 30% rates")
		}
		if !slices.Equal(a, b) {
			t.Fatal("the same seed gave different decisions")
		}
		if slices.Equal(a, c) {
			t.Fatal("different seeds gave identical decisions")
		}
	})
}

func TestSkew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := faultstore.Skew(tenure.SystemClock, 1.01)
		slow := faultstore.Skew(tenure.SystemClock, 0.99)
		f0, s0 := fast.Now(), slow.Now()
		time.Sleep(100 * time.Second)
		if got := fast.Now().Sub(f0); got != 101*time.Second {
			t.Errorf("fast clock advanced %s in 100s, want 101s", got)
		}
		if got := slow.Now().Sub(s0); got != 99*time.Second {
			t.Errorf("slow clock advanced %s in 100s, want 99s", got)
		}
		start := time.Now()
		tm := slow.NewTimer(99 * time.Second)
		<-tm.C()
		if got := time.Since(start); got < 100*time.Second || got > 100*time.Second+time.Microsecond {
			t.Errorf("99s timer on a 1%%-slow clock fired after %s of real time, want 100s", got)
		}
		begin := slow.Now()
		tm.Reset(time.Second)
		<-tm.C()
		if got := slow.Now().Sub(begin); got < time.Second {
			t.Errorf("timer fired early by its own clock: %s < 1s", got)
		}
	})
}

func TestLatencySpreadsCallsReleasedTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Seed: 5, Rates: faultstore.Rates{Latency: 10 * time.Millisecond}})
		s := faultstore.Wrap(mem, f)
		f.Pause()
		start := time.Now()
		arrived := make(chan time.Duration, 3)
		for _, id := range []string{"a", "b", "c"} {
			go func() {
				_, _ = s.Acquire(t.Context(), "k-"+id, id, ttl)
				arrived <- time.Since(start)
			}()
		}
		time.Sleep(time.Second)
		f.Resume() // all three are released at one instant...
		seen := map[time.Duration]bool{}
		for range 3 {
			d := <-arrived - time.Second
			if d < 0 || d >= 10*time.Millisecond {
				t.Fatalf("call finished %s after the resume, want within the 10ms latency", d)
			}
			seen[d] = true
		}
		if len(seen) != 3 {
			t.Fatalf("calls released together finished at %d distinct instants, want 3", len(seen))
		}
	})
}

// TestDecisionsDoNotDependOnTheOrderOfOperations: with one seed, the n-th
// Get and the n-th Renew get the same faults whether the Gets or the
// Renews come first (a simulation's replay must not depend on which of two
// goroutines reaches the store first at one virtual instant).
func TestDecisionsDoNotDependOnTheOrderOfOperations(t *testing.T) {
	run := func(getsFirst bool) (gets, renews []bool) {
		f := faultstore.New(faultstore.Plan{Seed: 7, Rates: faultstore.Rates{FailBefore: 0.5}})
		s := faultstore.Wrap(memory.New(nil), f)
		ctx := context.Background()
		l := tenure.Lease{Key: "k", Identity: "a", Term: 1, TTL: ttl}
		doGets := func() {
			for range 16 {
				_, err := s.Get(ctx, "k")
				gets = append(gets, errors.Is(err, faultstore.ErrInjected))
			}
		}
		doRenews := func() {
			for range 16 {
				err := s.Renew(ctx, l)
				renews = append(renews, errors.Is(err, faultstore.ErrInjected))
			}
		}
		if getsFirst {
			doGets()
			doRenews()
		} else {
			doRenews()
			doGets()
		}
		return gets, renews
	}
	g1, r1 := run(true)
	g2, r2 := run(false)
	if !slices.Equal(g1, g2) || !slices.Equal(r1, r2) {
		t.Fatalf("faults depend on the order of operations:\nGets   %v\n  then %v\nRenews %v\n  then %v", g1, g2, r1, r2)
	}
	if !slices.Contains(g1, true) || !slices.Contains(g1, false) {
		t.Fatalf("Gets all drew the same fault at rate 0.5: %v", g1)
	}
}

// stepper is a store that carries step-down requests itself, as the peer
// stores do.
type stepper struct {
	tenure.Store
	asked chan string
}

func (s stepper) RequestStepDown(_ context.Context, key string, _ tenure.StepDownRequest) (tenure.StepDown, error) {
	s.asked <- key
	return tenure.StepDown{}, nil
}

// publisherOnly is a store that publishes values but has no sessions, as
// the peer stores.
type publisherOnly struct{ tenure.Publisher }

func TestWrapForwardsStepDowner(t *testing.T) {
	for _, inner := range []tenure.Store{memory.New(nil), publisherOnly{memory.New(nil)}, ranged{memory.New(nil)}} {
		sd := stepper{Store: inner, asked: make(chan string, 1)}
		f := faultstore.New(faultstore.Plan{})
		w := faultstore.Wrap(sd, f)
		if _, ok := w.(tenure.StepDowner); !ok {
			t.Fatalf("wrapping a StepDowner (%T) hid the ability", inner)
		}
		if _, err := tenure.RequestStepDown(t.Context(), w, "k", tenure.StepDownRequest{}); err != nil {
			t.Fatalf("RequestStepDown: %v", err)
		}
		if got := <-sd.asked; got != "k" {
			t.Fatalf("the inner store was asked about %q, want k", got)
		}
		f.Partition(faultstore.FailFast)
		if _, err := tenure.RequestStepDown(t.Context(), w, "k", tenure.StepDownRequest{}); !errors.Is(err, faultstore.ErrInjected) {
			t.Fatalf("RequestStepDown during a partition: %v, want ErrInjected", err)
		}
		if _, ok := faultstore.Wrap(inner, f).(tenure.StepDowner); ok {
			t.Fatalf("wrapping a store that is no StepDowner (%T) made one", inner)
		}
	}
}
