package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/history"
)

// Stats summarises one checked history.
type Stats struct {
	Leaderships int
	// Recovery is how long after the faults healed a leader was live (0 if
	// one was live at that moment).
	Recovery time.Duration
	// MaxGap is the longest leaderless stretch after the first leader
	// following the heal.
	MaxGap time.Duration
	// Ends counts how leaderships ended, by reason (released, ErrLost,
	// ErrRenewDeadline, ErrStalled, context canceled).
	Ends map[string]int
}

// Check returns the violations of the package's invariants in h, a history
// of s, and statistics about it. No violations means the run was safe and
// live.
func Check(s *Scenario, h *History) (violations []string, st Stats) {
	h.mu.Lock()
	ls := make([]Leadership, len(h.Leaderships))
	for i, l := range h.Leaderships {
		ls[i] = *l
	}
	runErrs := h.RunErrs
	end := h.End
	observed := slices.Clone(h.Observed)
	st.Ends = map[string]int{}
	for _, e := range h.Entries {
		if e.Format == lostFormat {
			st.Ends[e.Args[0].(string)]++
		}
	}
	h.mu.Unlock()
	bad := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }

	for _, l := range ls {
		if l.Open() {
			bad("%s term %d: leader context still live after Run returned", l.ID, l.Term)
		}
	}
	for _, p := range s.Electors {
		if err, ok := runErrs[p.ID]; !ok || !errors.Is(err, context.Canceled) {
			bad("%s: Run returned %v, want context.Canceled", p.ID, err)
		}
	}
	st.Leaderships = len(ls)

	// Safety and fencing: the shared checker (two leaders at once, terms
	// that do not grow), in the order leaderships began.
	for _, v := range history.Check(ls, end, nil) {
		bad("%s", v.Detail)
	}
	ls = history.Sorted(ls)
	checkObserver(ls, observed, bad)
	st.Recovery, st.MaxGap = checkLiveness(s, ls, end, bad)
	return violations, st
}

// checkObserver checks what the observer reported: terms never go back,
// and every leadership that lasted was seen with its holder.
func checkObserver(ls []Leadership, observed []tenure.Record, bad func(string, ...any)) {
	seen := map[uint64]string{}
	for i, r := range observed {
		if i > 0 && r.Term < observed[i-1].Term {
			bad("observer went back from term %d to term %d", observed[i-1].Term, r.Term)
		}
		if r.Held() {
			seen[r.Term] = r.Holder
		}
	}
	for _, l := range ls {
		if l.End > l.Start && seen[l.Term] != l.ID {
			bad("observer never reported %s as the holder of term %d (live from %s to %s)", l.ID, l.Term, l.Start, l.End)
		}
	}
}

// checkLiveness checks that a leader was live within the scenario's bound
// after the faults healed and never left the key leaderless longer, and
// returns how long recovery took and the longest gap after it. ls is in
// start order; end is when the run ended.
func checkLiveness(s *Scenario, ls []Leadership, end time.Duration, bad func(string, ...any)) (recovery, maxGap time.Duration) {
	bound := s.LivenessBound()
	covered := s.FaultsEnd // leaders are known live (or handed off) until here
	first := true
	for _, l := range ls {
		if !l.Open() && l.End <= s.FaultsEnd {
			continue
		}
		if gap := l.Start - covered; gap > 0 {
			if first {
				recovery = gap
			} else {
				maxGap = max(maxGap, gap)
			}
			if gap > bound {
				bad("no leader from %s to %s (%s, bound %s)", covered, l.Start, gap, bound)
			}
		}
		first = false
		covered = max(covered, l.End)
	}
	if first {
		bad("no leader at all after the faults healed at %s (bound %s)", s.FaultsEnd, bound)
	} else if covered < s.End-bound && end > covered {
		bad("no leader from %s to the end at %s (bound %s)", covered, s.End, bound)
	}
	return recovery, maxGap
}

// Overlaps returns the safety and fencing violations in h, with the checker
// every tenure harness shares (package internal/history): two leader
// contexts live at the same virtual instant (a context is live from its
// Start until its End; one still live counts as live until now), and a
// leadership whose term is not greater than that of the one that began
// before it. [Check] reports the same; other harnesses (the peer
// simulations) call this one so that "two leaders" means one thing.
func Overlaps(h *History) []string {
	h.mu.Lock()
	ls := make([]Leadership, len(h.Leaderships))
	for i, l := range h.Leaderships {
		ls[i] = *l
	}
	h.mu.Unlock()
	var violations []string
	for _, v := range history.Check(ls, h.since(), nil) {
		violations = append(violations, v.Detail)
	}
	return violations
}
