// Package torture runs candidates against a store while injecting faults,
// records what happened, and checks it: terms strictly increase, the fenced
// ledger never accepts a stale term, leaders never overlap while faults stay
// within tenure's documented assumptions, and a leader appears promptly after
// every fault heals. It renders the history as a summary table and an SVG
// timeline.
//
// The checker and the ledger are plain data structures; the drivers that
// start processes, servers and proxies live in the package's tests.
package torture

import (
	"time"

	"github.com/tenurehq/tenure/internal/history"
)

// Interval is one leadership: from the moment a leader's task started until
// it was seen to stop (for a process: until its connection to the harness
// closed, which the kernel does when it dies); End is [history.Live] while
// it still ran at the end of the run. It is the model every tenure harness
// shares (package internal/history).
type Interval = history.Interval

// Live is the End of an [Interval] still running when the run ended.
const Live = history.Live

// FaultKind names a fault the harness injects.
type FaultKind string

// Faults. Within assumptions unless said otherwise.
const (
	FaultKill      FaultKind = "kill"      // SIGKILL of the leader
	FaultStop      FaultKind = "stop"      // SIGSTOP longer than the TTL, then SIGCONT
	FaultStopGroup FaultKind = "stopgroup" // SIGSTOP of the leader's whole process group: outside assumptions
	FaultPartition FaultKind = "partition" // a candidate cut off from the store
	FaultRestart   FaultKind = "restart"   // the store restarted
	FaultClockStep FaultKind = "clockstep" // a candidate's clock stepped
	FaultStoreErr  FaultKind = "storeerr"  // store requests fail or hang (in-process runs)
)

// Fault is one injected fault.
type Fault struct {
	Kind   FaultKind
	Target string // the candidate concerned, "" for the store
	At     time.Duration
	Healed time.Duration // when the fault ended (SIGCONT, partition healed, server back)
	// OutsideAssumptions marks faults tenure's guarantees do not cover
	// (a frozen process group, a monotonic clock jumping backwards): leaders
	// may then overlap, and only fencing protects the resource.
	OutsideAssumptions bool
}

// History is everything a run recorded.
type History struct {
	Store     string
	Seed      int64
	TTL       time.Duration
	Duration  time.Duration
	Bound     time.Duration // Config.Bound: a leader is due this soon after each heal
	Intervals []Interval
	Faults    []Fault
	Writes    []Write
	// Late lists the leaderships ended by the renew deadline, with how
	// long after it their task noticed (drivers that can tell: the
	// in-process one). A notice later than the margin TTL−RenewDeadline
	// can overlap the next leader; the summary names the latest, so that
	// an overlap can be told apart: a task that noticed late (a starved
	// scheduler) or an elector whose deadline was wrong.
	Late []Late
}

// Late is one leadership whose task noticed its end After its renew
// deadline, on its elector's clock.
type Late struct {
	ID    string
	Term  uint64
	After time.Duration
}

// sorted returns the intervals ordered by start.
func (h *History) sorted() []Interval { return history.Sorted(h.Intervals) }

// end is the interval's end, or the end of the run while it still runs.
func (h *History) end(iv Interval) time.Duration { return iv.EndOr(h.Duration) }
