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
	srv := server(t)
	root := "/watchkinds"
	tm := tamperOn(t, srv, root)
	st := open(t, "zk://"+srv.Addr+root)
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
	var last tenure.Record
	terms := map[string]uint64{} // each holder holds once, at one term
	expect := func(step, holder string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case r, ok := <-ch:
				if !ok {
					t.Fatalf("%s: the watch ended", step)
				}
				if r.Term < last.Term {
					t.Fatalf("%s: term went from %d to %d", step, last.Term, r.Term)
				}
				last = r
				if r.Holder != "" {
					if term, ok := terms[r.Holder]; ok && term != r.Term {
						t.Fatalf("%s: %q delivered at term %d, and before at term %d: a record mixes two states of the key node", step, r.Holder, r.Term, term)
					}
					terms[r.Holder] = r.Term
				}
				if r.Holder == holder {
					return
				}
			case <-deadline:
				t.Fatalf("%s: no record held by %q delivered (last %+v)", step, holder, last)
			}
		}
	}
	expect("initial", "")
	a, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect("grant", "alpha")
	tm.OverwriteGrant(t, key, "mallory")
	expect("overwritten from outside", "mallory")
	tm.DeleteGrant(t, key)
	expect("lease node deleted from outside", "")
	_ = st.Release(ctx, a) // superseded: its session ends
	b, err := st.Acquire(ctx, key, "beta", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect("grant again", "beta")
	if err := st.Release(ctx, b); err != nil {
		t.Fatal(err)
	}
	expect("release", "")
	c, err := st.Acquire(ctx, key, "gamma", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	expect("grant after a release", "gamma")
	tm.DeleteAll(t, key)
	expect("key node deleted", "")
	_ = st.Release(ctx, c)
	if _, err := st.Acquire(ctx, key, "delta", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	expect("key node created again", "delta")
}
