package tenure_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
)

// controlled is config with Config.Control at priority p.
func controlled(store tenure.Store, id string, p int) tenure.Config {
	cfg := config(store, id)
	cfg.Control = &tenure.Control{Priority: p}
	return cfg
}

// startCandidate starts id's elector on store with priority p, its terms
// recorded in b by a task that waits for cancellation.
func startCandidate(t *testing.T, store tenure.Store, b *book, id string, p int) *running {
	t.Helper()
	return start(newElector(t, controlled(store, id, p)), b.task(id, nil))
}

// startControlled starts an elector per id (priority 1), stopped when the
// test ends, and waits for the first term.
func startControlled(t *testing.T, store tenure.Store, b *book, ids ...string) (map[string]*running, *term) {
	t.Helper()
	runs := map[string]*running{}
	for _, id := range ids {
		runs[id] = startCandidate(t, store, b, id, 1)
	}
	t.Cleanup(func() { stopAll(runs) })
	return runs, <-b.began
}

func stopAll(runs map[string]*running) {
	for _, r := range runs {
		r.stop()
	}
}

func TestStepDownHandsOverToTheNamedCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		runs, first := startControlled(t, store, b, "a", "b", "c")
		to := "c"
		if first.id == "c" {
			to = "b"
		}
		time.Sleep(3 * ttl)
		asked := time.Now()
		sd, err := tenure.RequestStepDown(context.Background(), store, "job", tenure.StepDownRequest{To: to, Window: 5 * ttl})
		if err != nil {
			t.Fatalf("RequestStepDown: %v", err)
		}
		if sd.Leader.Holder != first.id || sd.Leader.Term != first.lease.Term {
			t.Fatalf("request made against %+v, want %s term %d", sd.Leader, first.id, first.lease.Term)
		}
		ended := <-b.ended
		next := <-b.began
		if ended.id != first.id || !errors.Is(ended.cause, tenure.ErrSteppedDown) {
			t.Fatalf("ended %s with cause %v; want %s with ErrSteppedDown", ended.id, ended.cause, first.id)
		}
		if next.id != to {
			t.Fatalf("%s took over; want the named %s", next.id, to)
		}
		if d := next.start.Sub(asked); d > ttl {
			t.Errorf("hand-over took %s, want well under a TTL", d)
		}
		if next.start.Before(ended.done) {
			t.Errorf("%s started at %v before %s stopped at %v", next.id, next.start, ended.id, ended.done)
		}
		// The old leader keeps campaigning (its Run has not returned) and
		// the new one keeps leading past the window.
		time.Sleep(10 * ttl)
		synctest.Wait()
		select {
		case err := <-runs[first.id].done:
			t.Fatalf("the leader that stepped down stopped running: %v", err)
		default:
		}
		b.mu.Lock()
		n := len(b.terms)
		b.mu.Unlock()
		if n != 2 {
			t.Fatalf("%d terms; want 2", n)
		}
		checkBook(t, b, first.start)
	})
}

func TestStepDownToAnAbsentCandidateFallsBackAfterTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		_, first := startControlled(t, store, b, "a", "b")
		const window = 4 * ttl
		asked := time.Now()
		if _, err := tenure.RequestStepDown(context.Background(), store, "job", tenure.StepDownRequest{To: "ghost", Window: window}); err != nil {
			t.Fatal(err)
		}
		if ended := <-b.ended; ended.id != first.id {
			t.Fatalf("%s ended, want %s", ended.id, first.id)
		}
		next := <-b.began
		if d := next.start.Sub(asked); d < window || d > window+ttl {
			t.Fatalf("%s took over %s after the request; want after the window (%s) and within a TTL of it", next.id, d, window)
		}
	})
}

func TestStepDownWithoutTargetLetsAnotherLead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		_, first := startControlled(t, store, b, "a", "b")
		asked := time.Now()
		if _, err := tenure.RequestStepDown(context.Background(), store, "job", tenure.StepDownRequest{Window: 4 * ttl}); err != nil {
			t.Fatal(err)
		}
		<-b.ended
		next := <-b.began
		if next.id == first.id || next.start.Sub(asked) > ttl {
			t.Fatalf("%s took over after %s; want the other candidate at once", next.id, next.start.Sub(asked))
		}
	})
}

func TestStepDownErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		ctx := context.Background()
		if _, err := tenure.RequestStepDown(ctx, store, "job", tenure.StepDownRequest{}); !errors.Is(err, tenure.ErrNoLeader) {
			t.Fatalf("step-down of a free key: %v, want ErrNoLeader", err)
		}
		if _, err := store.Acquire(ctx, "job", "x", time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := tenure.RequestStepDown(ctx, store, "job", tenure.StepDownRequest{}); err != nil {
			t.Fatal(err)
		}
		if _, err := tenure.RequestStepDown(ctx, store, "job", tenure.StepDownRequest{}); !errors.Is(err, tenure.ErrHeld) {
			t.Fatalf("a second step-down during the window: %v, want ErrHeld", err)
		}
		if _, err := tenure.RequestStepDown(ctx, store, "job", tenure.StepDownRequest{Window: time.Millisecond}); !errors.Is(err, tenure.ErrInvalid) {
			t.Fatalf("a 1ms window: %v, want ErrInvalid", err)
		}
	})
}

func TestDoReturnsErrSteppedDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		e := newElector(t, controlled(store, "a", 1))
		began := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- e.Do(context.Background(), func(ctx context.Context) error {
				close(began)
				<-ctx.Done()
				return nil
			})
		}()
		<-began
		if _, err := tenure.RequestStepDown(context.Background(), store, "job", tenure.StepDownRequest{Window: ttl}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, tenure.ErrSteppedDown) {
			t.Fatalf("Do = %v, want ErrSteppedDown", err)
		}
		if r, _ := store.Get(context.Background(), "job"); r.Held() {
			t.Fatalf("the key is still held after the step-down: %+v", r)
		}
	})
}

func TestNeverLeadLeavesTheKeyFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		r := startCandidate(t, store, b, "observer", tenure.NeverLead)
		time.Sleep(20 * ttl)
		synctest.Wait()
		rec, err := store.Get(context.Background(), "job")
		if err != nil || rec.Held() || rec.Term != 0 {
			t.Fatalf("key record %+v (err %v); want never granted", rec, err)
		}
		cs, err := tenure.Candidates(context.Background(), store, "job")
		if err != nil || len(cs) != 1 || cs[0].Identity != "observer" || cs[0].Priority != 0 {
			t.Fatalf("Candidates = %+v, %v; want the observer at priority 0", cs, err)
		}
		if err := r.stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if cs, _ := tenure.Candidates(context.Background(), store, "job"); len(cs) != 0 {
			t.Fatalf("after Run returned, Candidates = %+v; want none", cs)
		}
	})
}

func TestHighestPriorityWinsTheNextElection(t *testing.T) {
	for _, order := range [][]int{{1, 5, 2, 3}, {1, 2, 3, 5}, {1, 5, 3, 2}} {
		synctest.Test(t, func(t *testing.T) {
			store := memory.New(nil)
			b := newBook()
			runs := map[string]*running{}
			ids := []string{"p1", "p2", "p3", "p4"}
			runs[ids[0]] = startCandidate(t, store, b, ids[0], order[0])
			first := <-b.began
			for i := 1; i < len(ids); i++ {
				runs[ids[i]] = startCandidate(t, store, b, ids[i], order[i])
			}
			time.Sleep(3 * ttl) // the others register and read each other
			runs[first.id].stop()
			delete(runs, first.id)
			next := <-b.began
			want := ids[1]
			for i := 1; i < len(ids); i++ {
				if order[i] == 5 {
					want = ids[i]
				}
			}
			if next.id != want {
				t.Errorf("priorities %v: %s won; want %s, priority 5", order, next.id, want)
			}
			cs, _ := tenure.Candidates(context.Background(), store, "job")
			if len(cs) != 3 || cs[0].Identity != want {
				t.Errorf("Candidates = %+v; want 3, %s first", cs, want)
			}
			stopAll(runs)
		})
	}
}

func TestControlConfigIsValidated(t *testing.T) {
	store := memory.New(nil)
	for _, tc := range []struct {
		ctl tenure.Control
		key string
	}{
		{tenure.Control{Priority: -1}, "job"},
		{tenure.Control{Priority: tenure.MaxPriority + 1}, "job"},
		{tenure.Control{Priority: 1, Step: -time.Second}, "job"},
		{tenure.Control{Priority: 1}, string(make([]byte, tenure.MaxControlledKeyLen+1))},
	} {
		cfg := controlled(store, "a", 0)
		cfg.Control = &tc.ctl
		if tc.key != "job" {
			cfg.Key = ""
			for range tenure.MaxControlledKeyLen + 1 {
				cfg.Key += "k"
			}
		}
		if _, err := tenure.New(cfg); !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("New with Control %+v and a %d-byte key: %v, want ErrInvalid", tc.ctl, len(cfg.Key), err)
		}
	}
}

// TestHeldBackCandidateTakesTheNextTransferAtOnce: a candidate holding back
// during one transfer's window is named by the next, made as soon as the
// first ended early: it must not sleep out the first window.
func TestHeldBackCandidateTakesTheNextTransferAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		_, first := startControlled(t, store, b, "a", "b", "c")
		ids := []string{"a", "b", "c"}
		leader := first.id
		for round := range 4 {
			to := ids[(slices.Index(ids, leader)+1+round%2)%3]
			asked := time.Now()
			sd, err := tenure.RequestStepDown(context.Background(), store, "job", tenure.StepDownRequest{To: to, Window: 10 * ttl})
			if err != nil {
				t.Fatal(err)
			}
			<-b.ended
			next := <-b.began
			if next.id != to || next.start.Sub(asked) > ttl/100 {
				t.Fatalf("round %d: %s took over after %s; want %s at once", round, next.id, next.start.Sub(asked), to)
			}
			if err := store.Release(context.Background(), sd.Grant); err != nil {
				t.Fatal(err)
			}
			leader = to
		}
	})
}

// TestLeaderYieldsToAHigherPriorityAfterTheDelay: with YieldAfter, a
// leader hands over to a candidate of higher priority once it has been
// registered that long, not before.
func TestLeaderYieldsToAHigherPriorityAfterTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		const delay = 5 * ttl
		cfg := controlled(store, "low", 1)
		cfg.Control.YieldAfter = delay
		low := start(newElector(t, cfg), b.task("low", nil))
		defer low.stop()
		if first := <-b.began; first.id != "low" {
			t.Fatalf("%s leads, want low", first.id)
		}
		time.Sleep(2 * ttl)
		joined := time.Now()
		high := startCandidate(t, store, b, "high", 5)
		defer high.stop()
		next := <-b.began
		if d := next.start.Sub(joined); next.id != "high" || d < delay || d > delay+2*ttl {
			t.Fatalf("%s took over %s after high joined; want high after %s, within two TTLs of it", next.id, d, delay)
		}
		keepsLeading(t, store, "high", "high")
	})
}

// keepsLeading fails t unless id, called who in the failure, still holds
// "job" ten TTLs on: the candidate a hand-over went to keeps leading.
func keepsLeading(t *testing.T, store tenure.Store, id, who string) {
	t.Helper()
	time.Sleep(10 * ttl)
	synctest.Wait()
	if r, _ := store.Get(context.Background(), "job"); r.Holder != id {
		t.Fatalf("after the hand-over %q leads, want %s to keep leading", r.Holder, who)
	}
}

// TestControlIsAdvisory: when the control key and the candidate slots
// cannot be read (every Get and Watch fails), a candidate with Control
// still gets elected and leads: control never holds leadership hostage.
func TestControlIsAdvisory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Rates: faultstore.Rates{Ops: faultstore.OpGet | faultstore.OpWatch, FailBefore: 1}})
		b := newBook()
		r := startCandidate(t, faultstore.Wrap(mem, f), b, "a", 1)
		defer r.stop()
		select {
		case tm := <-b.began:
			if tm.id != "a" {
				t.Fatalf("%s leads", tm.id)
			}
		case <-time.After(5 * ttl):
			t.Fatal("not elected within 5 TTLs while the control key could not be read")
		}
		time.Sleep(5 * ttl)
		synctest.Wait()
		if rec, _ := mem.Get(context.Background(), "job"); rec.Holder != "a" {
			t.Fatalf("holder %q, want a to keep leading", rec.Holder)
		}
	})
}

// crossing is a memory store on which a step-down request for the old
// leader's term, to a candidate that never comes, is made while the first
// Acquire of "job" by candidate is on its way: after candidate's read of
// the control key, before the store grants it the key.
type crossing struct {
	*memory.Store
	candidate string
	old       tenure.Lease
	once      sync.Once
}

func (c *crossing) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	if key == "job" && id == c.candidate {
		c.once.Do(func() {
			_, _ = tenure.RequestStepDown(ctx, c.Store, "job", tenure.StepDownRequest{To: "ghost", Window: 4 * ttl, Term: c.old.Term})
			_ = c.Store.Release(ctx, c.old)
		})
	}
	return c.Store.Acquire(ctx, key, id, ttl)
}

// A candidate whose Acquire crossed a step-down request for another
// candidate gives the grant back before its task starts, and holds back
// for the window, as if it had seen the request first.
func TestAcquireThatCrossedAStepDownIsGivenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		old, err := mem.Acquire(context.Background(), "job", "old", ttl)
		if err != nil {
			t.Fatal(err)
		}
		store := &crossing{Store: mem, candidate: "b", old: old}
		b := newBook()
		run := startCandidate(t, store, b, "b", 1)
		defer stopAll(map[string]*running{"b": run})
		asked := time.Now()
		// b's first Acquire crosses the request: b read no request before
		// it, and old releases just before the store grants it.
		next := <-b.began
		if d := next.start.Sub(asked); d < 4*ttl {
			t.Fatalf("b led %s after a request for ghost crossed its Acquire; want after the %s window", d, 4*ttl)
		}
	})
}

// TestStepDownEndsOnceTheTargetLeadsAndGoes: a step-down hands over to
// the named candidate with a window of 20 TTLs, and without the
// requester's release (tenure step-down --no-wait, or a library caller
// that lets it expire). The named candidate leads, then stops. The others
// used to hold back for the rest of the window, the key unled; a request
// is done once the key was taken in a later term, so one of them leads
// within a couple of TTLs, and no two tasks overlap.
func TestStepDownEndsOnceTheTargetLeadsAndGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		runs, first := startControlled(t, store, b, "a", "b", "c")
		to := "c"
		if first.id == "c" {
			to = "b"
		}
		const window = 20 * ttl
		if _, err := tenure.RequestStepDown(context.Background(), store, "job", tenure.StepDownRequest{To: to, Window: window}); err != nil {
			t.Fatal(err)
		}
		if ended := <-b.ended; ended.id != first.id {
			t.Fatalf("%s ended, want %s", ended.id, first.id)
		}
		if next := <-b.began; next.id != to {
			t.Fatalf("%s took over; want the named %s", next.id, to)
		}
		time.Sleep(ttl)
		stopped := time.Now()
		runs[to].stop()
		delete(runs, to)
		third := <-b.began
		if third.id == to {
			t.Fatalf("%s led again after it stopped", to)
		}
		if d := third.start.Sub(stopped); d > 3*ttl {
			t.Fatalf("%s took over %s after %s stopped; want within a few TTLs, not the rest of the %s window", third.id, d, to, window)
		}
		checkBook(t, b, first.start)
	})
}
