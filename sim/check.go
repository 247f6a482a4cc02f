package sim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
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
		if l.Done < 0 {
			bad("%s term %d: leader context still live after Run returned", l.ID, l.Term)
		}
	}
	for _, p := range s.Electors {
		if err, ok := runErrs[p.ID]; !ok || !errors.Is(err, context.Canceled) {
			bad("%s: Run returned %v, want context.Canceled", p.ID, err)
		}
	}
	st.Leaderships = len(ls)

	// Safety and fencing, in the order leaderships began.
	violations = append(violations, overlaps(ls)...)

	// The observer: terms never go back, and every leadership that lasted
	// was seen with its holder.
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
		if l.Done > l.Start && seen[l.Term] != l.ID {
			bad("observer never reported %s as the holder of term %d (live from %s to %s)", l.ID, l.Term, l.Start, l.Done)
		}
	}

	// Liveness after the heal.
	bound := s.LivenessBound()
	covered := s.FaultsEnd // leaders are known live (or handed off) until here
	first := true
	for _, l := range ls {
		if l.Done >= 0 && l.Done <= s.FaultsEnd {
			continue
		}
		if gap := l.Start - covered; gap > 0 {
			if first {
				st.Recovery = gap
			} else {
				st.MaxGap = max(st.MaxGap, gap)
			}
			if gap > bound {
				bad("no leader from %s to %s (%s, bound %s)", covered, l.Start, gap, bound)
			}
		}
		first = false
		covered = max(covered, l.Done)
	}
	if first {
		bad("no leader at all after the faults healed at %s (bound %s)", s.FaultsEnd, bound)
	} else if covered < s.End-bound && end > covered {
		bad("no leader from %s to the end at %s (bound %s)", covered, s.End, bound)
	}
	return violations, st
}

// Overlaps returns the safety and fencing violations in h: two leader
// contexts live at the same virtual instant (a context is live from its
// Start until its Done; call it once every leadership ended), and a
// leadership whose term is not greater than that of the one that
// began before it. [Check] reports the same; other harnesses (the peer
// simulations) call this one so that "two leaders" means one thing.
func Overlaps(h *History) []string {
	h.mu.Lock()
	ls := make([]Leadership, len(h.Leaderships))
	for i, l := range h.Leaderships {
		ls[i] = *l
	}
	h.mu.Unlock()
	return overlaps(ls)
}

// overlaps checks ls, which it sorts by start.
func overlaps(ls []Leadership) (violations []string) {
	bad := func(format string, args ...any) { violations = append(violations, fmt.Sprintf(format, args...)) }
	slices.SortStableFunc(ls, func(a, b Leadership) int {
		if a.Start != b.Start {
			return int(a.Start - b.Start)
		}
		return int(int64(a.Term) - int64(b.Term))
	})
	var latest *Leadership // the leadership live the longest so far
	for i := range ls {
		l := &ls[i]
		if latest != nil && l.Start < latest.Done {
			bad("two leaders at once: %s term %d live from %s while %s term %d was live until %s",
				l.ID, l.Term, l.Start, latest.ID, latest.Term, latest.Done)
		}
		if i > 0 && l.Term <= ls[i-1].Term {
			bad("term did not increase: %s term %d at %s follows %s term %d",
				l.ID, l.Term, l.Start, ls[i-1].ID, ls[i-1].Term)
		}
		if latest == nil || l.Done > latest.Done || l.Done < 0 {
			latest = l
		}
	}
	return violations
}
