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
		if got := tr.Apply(s.holder, s.term); got != s.want || tr.Transitions != s.trans {
			t.Errorf("step %d Apply(%q, %d) = %v with %d transitions, want %v with %d",
				i, s.holder, s.term, got, tr.Transitions, s.want, s.trans)
		}
	}
}
