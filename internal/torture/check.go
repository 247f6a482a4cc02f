package torture

import (
	"fmt"
	"slices"
	"time"

	"github.com/tenurehq/tenure/internal/history"
)

// Violation is one broken promise found in a [History]: Rule is "terms",
// "overlap" (the shared checker's, package internal/history), "fencing" or
// "liveness".
type Violation = history.Violation

// Check returns every violation in h. failoverBound is how soon after a
// fault heals a leader must be running (tenure's promise: TTL plus the
// retry interval, plus the time a process needs to start its child).
func Check(h *History, failoverBound time.Duration) []Violation {
	var vs []Violation
	add := func(rule, format string, args ...any) {
		vs = append(vs, Violation{Rule: rule, Detail: fmt.Sprintf(format, args...)})
	}
	iv := h.sorted()

	// Terms strictly increase from one leadership to the next, and leaders
	// never overlap, unless a fault outside the assumptions hit the earlier
	// leader while the later one already led.
	vs = append(vs, history.Check(h.Intervals, h.Duration, h.excused)...)

	// The ledger accepted exactly the writes whose term was not stale, and
	// every term written belongs to a leadership.
	terms := map[uint64]string{}
	for _, x := range iv {
		terms[x.Term] = x.ID
	}
	var highest uint64
	for _, w := range h.Writes {
		fresh := w.Term >= highest
		switch {
		case w.Accepted && !fresh:
			add("fencing", "the ledger accepted %s's write with stale term %d at %s (highest seen %d)", w.ID, w.Term, ms(w.At), highest)
		case !w.Accepted && fresh:
			add("fencing", "the ledger rejected %s's write with current term %d at %s", w.ID, w.Term, ms(w.At))
		}
		if fresh {
			highest = w.Term
		}
		if id, ok := terms[w.Term]; !ok || id != w.ID {
			add("fencing", "%s wrote with term %d at %s, which it was never granted", w.ID, w.Term, ms(w.At))
		}
	}

	// After each fault heals, a leader runs within failoverBound.
	for _, f := range h.Faults {
		if led, judged := h.ledAfter(iv, f, failoverBound); judged && !led {
			add("liveness", "no leader within %s after the %s fault on %q healed at %s", failoverBound, f.Kind, f.Target, ms(f.Healed))
		}
	}
	return vs
}

// ledAfter judges whether a leader ran (in iv, sorted) within bound after
// fault f healed, or before another fault came into force if one did
// sooner. It is judged if a leader ran then, or if the whole bound passed
// within the run with no other fault: a fault that came first, with no
// leader yet, leaves it unjudged (Run's Config.Bound holds the next fault
// back until a leader runs or the bound passed, so that only the end of
// the run leaves a heal unjudged).
func (h *History) ledAfter(iv []Interval, f Fault, bound time.Duration) (led, judged bool) {
	if f.Healed == 0 {
		return false, false
	}
	to := f.Healed + bound
	cut := to
	for _, g := range h.Faults {
		if g.At < cut && (g.Healed == 0 || g.Healed > f.Healed) && g != f {
			cut = max(g.At, f.Healed)
		}
	}
	if leaderDuring(iv, h, f.Healed, cut) {
		return true, true
	}
	return false, cut == to && to <= h.Duration
}

// excused reports whether an overlap of leader a during [from, to] is
// explained by a fault outside the assumptions that hit a.
func (h *History) excused(a Interval, from, to time.Duration) bool {
	for _, f := range h.Faults {
		if f.OutsideAssumptions && f.Target == a.ID && f.At <= to && (f.Healed == 0 || f.Healed >= from) {
			return true
		}
	}
	return false
}

func leaderDuring(iv []Interval, h *History, from, to time.Duration) bool {
	for _, x := range iv {
		if x.Start <= to && h.end(x) > from {
			return true
		}
	}
	return false
}

// Failovers returns, for every fault that hit the leader of the moment, how
// long until the next leadership began (a higher term; the restarted victim
// itself may win it).
func Failovers(h *History) map[FaultKind][]time.Duration {
	out := map[FaultKind][]time.Duration{}
	iv := h.sorted()
	for _, f := range h.Faults {
		if f.Target == "" {
			continue
		}
		var term uint64
		led := false
		for _, x := range iv {
			if x.ID == f.Target && x.Start <= f.At && h.end(x) >= f.At {
				led, term = true, x.Term
			}
		}
		if !led {
			continue
		}
		for _, x := range iv {
			if x.Term > term && x.Start >= f.At {
				out[f.Kind] = append(out[f.Kind], x.Start-f.At)
				break
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
