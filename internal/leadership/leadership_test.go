package leadership

import "testing"

func TestApply(t *testing.T) {
	var tr Tracker
	steps := []struct {
		holder string
		term   uint64
		want   Change
		trans  uint64
	}{
		{"", 0, Same, 0},       // never granted
		{"a", 1, NewLeader, 0}, // first leader seen: not a transition
		{"a", 1, Same, 0},      // repeat
		{"", 1, Vacant, 0},     // released
		{"a", 1, Same, 0},      // late sighting of the ended term
		{"b", 2, NewLeader, 1}, // new holder
		{"b", 1, Same, 1},      // older term
		{"b", 3, NewLeader, 2}, // same holder, new term: a transition too
		{"", 5, Vacant, 2},     // a term we never saw held, already free
	}
	for i, s := range steps {
		if got := tr.Apply(FromElector, s.holder, s.term); got != s.want || tr.Transitions != s.trans {
			t.Errorf("step %d Apply(%q, %d) = %v with %d transitions, want %v with %d",
				i, s.holder, s.term, got, tr.Transitions, s.want, s.trans)
		}
	}
}

// TestApplyFromObserver: a record of a term older than the observer's
// previous one is the store's state (the observer holds such records back
// as stale news until the store showed them alone for a TTL), taken as the
// current leadership; one older than the elector's news only was read
// before that news, and is ignored; the elector's events stay ordered.
func TestApplyFromObserver(t *testing.T) {
	var tr Tracker
	steps := []struct {
		src    Source
		holder string
		term   uint64
		want   Change
		trans  uint64
	}{
		{FromObserver, "a", 3, NewLeader, 0},
		{FromObserver, "a", 1000000, NewLeader, 1}, // a forged term
		{FromElector, "b", 4, Same, 1},             // the elector's reads lag behind it
		{FromObserver, "b", 4, NewLeader, 2},       // shown for a TTL: the store's state
		{FromObserver, "b", 4, Same, 2},            // repeat
		{FromElector, "c", 6, NewLeader, 3},        // the elector's news...
		{FromObserver, "", 4, Same, 3},             // ...and a record read before it
		{FromObserver, "c", 6, Same, 3},
		{FromElector, "c", 5, Same, 3}, // the elector's events stay ordered
		{FromObserver, "", 6, Vacant, 3},
		{FromObserver, "d", 7, NewLeader, 4},
		{FromObserver, "", 2, Vacant, 4}, // a backup restored, free
		{FromObserver, "e", 3, NewLeader, 5},
	}
	for i, s := range steps {
		if got := tr.Apply(s.src, s.holder, s.term); got != s.want || tr.Transitions != s.trans {
			t.Errorf("step %d Apply(%v, %q, %d) = %v with %d transitions, want %v with %d",
				i, s.src, s.holder, s.term, got, tr.Transitions, s.want, s.trans)
		}
	}
	if tr.Holder != "e" || tr.Term != 3 {
		t.Errorf("the tracker ends at %q in term %d, want e in term 3", tr.Holder, tr.Term)
	}
}
