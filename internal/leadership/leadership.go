// Package leadership decides, from the records and events a process sees
// about one key, when leadership moved: written once so the HTTP view and
// the metrics count the same transitions.
package leadership

// Tracker follows the holder and term of one key. The zero value is ready
// to use and knows nothing. It is not safe for concurrent use: callers hold
// their own lock.
type Tracker struct {
	Holder string // "" when nobody leads (or nothing seen yet)
	Term   uint64
	// Transitions counts new leadership terms seen after the first one:
	// a different holder, or the same holder elected again.
	Transitions uint64

	seenLeader bool
}

// Change is what [Tracker.Apply] found.
type Change int

const (
	// Same: nothing new, or older than what is known.
	Same Change = iota
	// NewLeader: a new term with a holder began.
	NewLeader
	// Vacant: the current term ended (released or expired); nobody leads.
	Vacant
)

// Apply takes one sighting of (holder, term) and reports what changed.
// Terms never go back, so a sighting of an older term is ignored; within
// one term the only move is from held to free, so a late sighting of a
// term as held after it was seen free is ignored too.
func (t *Tracker) Apply(holder string, term uint64) Change {
	switch {
	case term < t.Term:
		return Same
	case term == t.Term && (holder == t.Holder || holder != ""):
		return Same
	}
	t.Holder, t.Term = holder, term
	if holder == "" {
		return Vacant
	}
	if t.seenLeader {
		t.Transitions++
	}
	t.seenLeader = true
	return NewLeader
}
