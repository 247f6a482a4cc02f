// Package history is the one model of "who led when" that every harness in
// tenure records (the simulation, the torture runs, the demo and the CLI
// benchmarks), and the one checker of what "two leaders at once" and "a
// term that did not grow" mean, so that every report counts the same thing.
//
// Times are offsets on one clock chosen by the harness: the simulation's
// virtual time, the torture recorder's monotonic clock, the demo workers'
// CLOCK_MONOTONIC readings. Only differences between them matter.
package history

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Live is the End of an interval that had not ended when the run did.
const Live time.Duration = -1

// Interval is one leadership: from the moment a leader's task started until
// it was seen to stop, or [Live].
type Interval struct {
	ID    string
	Term  uint64
	Start time.Duration
	End   time.Duration
}

// Open reports whether the interval had not ended.
func (iv Interval) Open() bool { return iv.End < 0 }

// EndOr is the interval's end, or runEnd while it is open.
func (iv Interval) EndOr(runEnd time.Duration) time.Duration {
	if iv.Open() {
		return runEnd
	}
	return iv.End
}

// Violation is one broken promise.
type Violation struct {
	// Rule names the promise: RuleOverlap, RuleTerms, or a harness's own
	// ("fencing", "liveness", ...).
	Rule   string
	Detail string
}

// The rules Check enforces.
const (
	RuleOverlap = "overlap" // two leaders at once
	RuleTerms   = "terms"   // a leadership whose term is not above the one before
)

func (v Violation) String() string { return v.Rule + ": " + v.Detail }

// Excuse reports whether earlier's overlap with a later leadership during
// [from, to] is explained, by a fault outside tenure's assumptions for
// instance. nil excuses nothing.
type Excuse func(earlier Interval, from, to time.Duration) bool

// Sorted returns ivs ordered by start, then by term; ivs is not modified.
func Sorted(ivs []Interval) []Interval {
	s := slices.Clone(ivs)
	slices.SortStableFunc(s, func(a, b Interval) int {
		return cmp.Or(cmp.Compare(a.Start, b.Start), cmp.Compare(a.Term, b.Term))
	})
	return s
}

// Check returns the safety violations in ivs, in the order leaderships
// began: every leadership's term is greater than the one that began before
// it, and no leadership begins while another is live (an interval ending
// exactly when the next begins is a handover, not an overlap), unless
// excuse explains it. runEnd stands for the end of open intervals.
func Check(ivs []Interval, runEnd time.Duration, excuse Excuse) []Violation {
	var vs []Violation
	iv := Sorted(ivs)
	for i := 1; i < len(iv); i++ {
		if iv[i].Term <= iv[i-1].Term {
			vs = append(vs, Violation{RuleTerms, fmt.Sprintf("term did not increase: %s term %d at %s follows %s term %d at %s",
				iv[i].ID, iv[i].Term, ms(iv[i].Start), iv[i-1].ID, iv[i-1].Term, ms(iv[i-1].Start))})
		}
	}
	for i := range iv {
		end := iv[i].EndOr(runEnd)
		for j := i + 1; j < len(iv) && iv[j].Start < end; j++ {
			to := min(end, iv[j].EndOr(runEnd))
			if excuse != nil && excuse(iv[i], iv[j].Start, to) {
				continue
			}
			vs = append(vs, Violation{RuleOverlap, fmt.Sprintf("two leaders at once: %s term %d and %s term %d both led from %s to %s",
				iv[i].ID, iv[i].Term, iv[j].ID, iv[j].Term, ms(iv[j].Start), ms(to))})
		}
	}
	return vs
}

// MaxOverlap is the longest time two leaderships in ivs were live at once,
// 0 if never; runEnd stands for the end of open intervals.
func MaxOverlap(ivs []Interval, runEnd time.Duration) time.Duration {
	var worst time.Duration
	iv := Sorted(ivs)
	for i := range iv {
		end := iv[i].EndOr(runEnd)
		for j := i + 1; j < len(iv) && iv[j].Start < end; j++ {
			worst = max(worst, min(end, iv[j].EndOr(runEnd))-iv[j].Start)
		}
	}
	return worst
}

func ms(d time.Duration) string { return d.Round(time.Microsecond).String() }
