package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/history"
	"github.com/tenurehq/tenure/store/memory"
)

// TestRandomStepDowns makes random step-down requests (to a live candidate,
// to an absent one, to anyone), with random windows, pauses and early ends
// of the window, among four electors of random priorities, on the fake
// clock. Each request must be obeyed as documented, and the history of
// every term must pass the shared checker: never two tasks at once, terms
// growing.
func TestRandomStepDowns(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomStepDowns(t, seed) })
		})
	}
}

func randomStepDowns(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 7))
	store := memory.New(nil)
	b := newBook()
	ids := []string{"a", "b", "c", "d"}
	runs := map[string]*running{}
	var mu sync.Mutex
	live, most := 0, 0
	for _, id := range ids {
		// The task counts itself out before it returns, so the count is
		// exact: the elector releases only after the task returned.
		body := func(ctx context.Context) error {
			mu.Lock()
			live++
			most = max(most, live)
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			live--
			mu.Unlock()
			return nil
		}
		runs[id] = start(newElector(t, controlled(store, id, 1+rnd.IntN(3))), b.task(id, body))
	}
	began := time.Now()
	err := stepDownRounds(rnd, store, b, ids, 25)
	stopAll(runs)
	if err != nil {
		t.Fatal(err)
	}
	if most != 1 {
		t.Fatalf("%d tasks ran at once", most)
	}
	checkBook(t, b, began)
}

// stepDownRounds makes n random step-down requests and checks that each
// was obeyed as documented.
func stepDownRounds(rnd *rand.Rand, store *memory.Store, b *book, ids []string, n int) error {
	leader := <-b.began
	for round := range n {
		time.Sleep(time.Duration(rnd.IntN(3000)) * time.Millisecond)
		targets := append(slices.DeleteFunc(slices.Clone(ids), func(s string) bool { return s == leader.id }), "ghost", "")
		to := targets[rnd.IntN(len(targets))]
		window := time.Duration(1+rnd.IntN(4)) * ttl
		asked := time.Now()
		sd, err := tenure.RequestStepDown(context.Background(), store, "job", tenure.StepDownRequest{To: to, Window: window})
		var held *tenure.HeldError
		if errors.As(err, &held) {
			// The last window was not ended early: a request is refused
			// until it passes.
			time.Sleep(held.Record.Remaining + time.Millisecond)
			asked = time.Now()
			sd, err = tenure.RequestStepDown(context.Background(), store, "job", tenure.StepDownRequest{To: to, Window: window})
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		next := <-b.began
		if next.id != to && next.start.Sub(asked) < ttl/100 && steppedDownAtOnce(b, next) {
			// A request made after a winner's second read of the control
			// key (see crossedStepDown) but against the old term reaches
			// it through its watch: it steps down at once. One extra term,
			// never two tasks at once (the checker below sees every term).
			next = <-b.began
		}
		switch wait := next.start.Sub(asked); {
		case to == "ghost" && (wait < window || wait > window+ttl):
			return fmt.Errorf("round %d: to an absent candidate: %s took over after %s; want after the %s window", round, next.id, wait, window)
		case to == "" && (next.id == leader.id || wait > ttl/100):
			return fmt.Errorf("round %d: to anyone: %s took over from %s after %s; want another at once", round, next.id, leader.id, wait)
		case to != "" && to != "ghost" && (next.id != to || wait > ttl/100):
			return fmt.Errorf("round %d: to %s: %s took over after %s", round, to, next.id, wait)
		}
		if rnd.IntN(2) == 0 {
			if err := store.Release(context.Background(), sd.Grant); err != nil && !errors.Is(err, tenure.ErrLost) {
				return err
			}
		}
		leader = next
	}
	return nil
}

// steppedDownAtOnce reports whether term tm has ended, once every
// goroutine of the bubble is idle, with cause ErrSteppedDown.
func steppedDownAtOnce(b *book, tm *term) bool {
	synctest.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	return !tm.done.IsZero() && errors.Is(tm.cause, tenure.ErrSteppedDown)
}

// checkBook runs the shared history checker over the terms b recorded.
func checkBook(t *testing.T, b *book, began time.Time) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var ivs []history.Interval
	for _, tm := range b.terms {
		iv := history.Interval{ID: tm.id, Term: tm.lease.Term, Start: tm.start.Sub(began), End: history.Live}
		if !tm.done.IsZero() {
			iv.End = tm.done.Sub(began)
		}
		ivs = append(ivs, iv)
	}
	if vs := history.Check(ivs, time.Since(began), nil); len(vs) != 0 {
		t.Fatalf("%d terms; violations: %v", len(ivs), vs)
	}
}
