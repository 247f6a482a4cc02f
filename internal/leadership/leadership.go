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
	// observed is the term of the last record from FromObserver, applied
	// or not: the observer never delivers a term older than it unless the
	// store showed that older term alone for a TTL.
	observed uint64
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

// Source is where a sighting came from, which decides what a sighting of
// an older term means.
type Source int

const (
	// FromElector: an event of this process's own elector (elected, lost,
	// released, a new holder seen while campaigning). Its events come in
	// order, but may come after an observer's record of a newer term, and
	// a campaigning elector reports what its store reads show, stale news
	// included: a sighting of an older term is ignored.
	FromElector Source = iota
	// FromObserver: a record as tenure.Observer.Changes delivers them,
	// past the stale-news filter of tenure.Follow. A record of a term
	// older than the observer's previous record is no stale news: the
	// store showed it, and nothing newer, for a TTL (a term written far
	// above the key's counter has gone, a backup was restored), so it is
	// taken as the current leadership whatever was seen before. A record
	// older than an elector's event but not than the observer's previous
	// record was merely read before that event, and is ignored.
	FromObserver
)

// Apply takes one sighting of (holder, term) from src and reports what
// changed. Terms never go back, so a sighting of an older term is ignored
// (except from FromObserver, see there); within one term the only move is
// from held to free, so a late sighting of a term as held after it was
// seen free is ignored too.
func (t *Tracker) Apply(src Source, holder string, term uint64) Change {
	back := false // the observer went back to an older term: the store's state
	if src == FromObserver {
		back = term < t.observed
		t.observed = term
	}
	switch {
	case back:
		// term < t.observed <= t.Term: a new term, not a late sighting.
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
