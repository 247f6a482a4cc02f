package zk_test

import (
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// TestWatchEachKindOfChange follows one key through every kind of change
// a watch re-arms after: a grant (child and data watches fire), a key node
// rewritten from outside (data only), a lease node deleted from outside
// (child only), a release (child only), the key node deleted and created
// again (existence watch). Each is delivered, in order, with terms that
// never go back, and no record mixes the key node's data before a change
// with its stat after it.
func TestWatchEachKindOfChange(t *testing.T) {
	tm, st := tamperedStore(t, "/watchkinds")
	ctx := ctxT(t, 60*time.Second)
	const key = "k"
	// The key node exists before the watch: its watches are the child
	// and data watches.
	l, err := st.Acquire(ctx, key, "setup", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	ch, err := st.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	expect := (&watchSteps{ch: ch, terms: map[string]uint64{}}).expect
	expect(t, "initial", "")
	a, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "grant", "alpha")
	tm.OverwriteGrant(t, key, "mallory")
	expect(t, "overwritten from outside", "mallory")
	tm.DeleteGrant(t, key)
	expect(t, "lease node deleted from outside", "")
	_ = st.Release(ctx, a) // superseded: its session ends
	b, err := st.Acquire(ctx, key, "beta", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "grant again", "beta")
	if err := st.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	expect(t, "release", "")
	c, err := st.Acquire(ctx, key, "gamma", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, "grant after a release", "gamma")
	tm.DeleteAll(t, key)
	expect(t, "key node deleted", "")
	_ = st.Release(ctx, c)
	if _, err := st.Acquire(ctx, key, "delta", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	expect(t, "key node created again", "delta")
}

// watchSteps reads a watch's records step by step, checking on the way
// that terms never go back and that each holder is delivered at one term
// only (a record never mixes two states of the key node).
type watchSteps struct {
	ch    <-chan tenure.Record
	last  tenure.Record
	terms map[string]uint64
}

// expect reads records until one held by holder ("" for free) comes, for
// at most 10 s.
func (w *watchSteps) expect(t *testing.T, step, holder string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case r, ok := <-w.ch:
			if !ok {
				t.Fatalf("%s: the watch ended", step)
			}
			if r.Term < w.last.Term {
				t.Fatalf("%s: term went from %d to %d", step, w.last.Term, r.Term)
			}
			w.last = r
			if r.Holder != "" {
				if term, ok := w.terms[r.Holder]; ok && term != r.Term {
					t.Fatalf("%s: %q delivered at term %d, and before at term %d: a record mixes two states of the key node", step, r.Holder, r.Term, term)
				}
				w.terms[r.Holder] = r.Term
			}
			if r.Holder == holder {
				return
			}
		case <-deadline:
			t.Fatalf("%s: no record held by %q delivered (last %+v)", step, holder, w.last)
		}
	}
}
