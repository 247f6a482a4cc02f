package sim

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/history"
)

// History is what a run recorded. Times are offsets from the start of the
// run, in the bubble's virtual time (the store's clock).
type History struct {
	origin time.Time

	mu          sync.Mutex
	Entries     []Entry
	Leaderships []*Leadership
	// Observed is what an [tenure.Observer] of the key reported, in order.
	Observed []tenure.Record
	// RunErrs is what each elector's Run returned, by identity.
	RunErrs map[string]error
	// End is when the run finished.
	End time.Duration
}

// Entry is one line of a history.
type Entry struct {
	At   time.Duration
	Who  string
	Term uint64
	// What happened, as a format and its arguments: formatting is left to
	// String, which runs only for failures and replays.
	Format string
	Args   []any
}

// What renders what happened.
func (e Entry) What() string { return fmt.Sprintf(e.Format, e.Args...) }

// Leadership is one leader context: live from Start until End, the time
// its Done channel was seen closed; End is [history.Live] while it is live.
// It is the model every tenure harness shares (package internal/history).
type Leadership = history.Interval

// NewHistory returns an empty history whose offsets count from now, for
// harnesses other than [Run] (the peer simulations) that record
// leaderships with [History.Started] and [History.Ended] and check them
// with [Overlaps].
func NewHistory() *History {
	return &History{origin: time.Now(), RunErrs: map[string]error{}}
}

// Started records that id's leader context of term became live now and
// returns the leadership to pass to [History.Ended]. Safe for concurrent
// use.
func (h *History) Started(id string, term uint64) *Leadership { return h.started(id, term) }

// Ended records that l's leader context is done now; only the first call
// for l counts (a crashed process's task ends when it dies, whatever it
// reports later). Safe for concurrent use.
func (h *History) Ended(l *Leadership) { h.ended(l) }

// Note adds a line to the history (shown in failure messages). Safe for
// concurrent use.
func (h *History) Note(who string, term uint64, format string, args ...any) {
	h.add(who, term, format, args...)
}

func (h *History) since() time.Duration { return time.Since(h.origin) }

func (h *History) add(who string, term uint64, format string, args ...any) {
	at := h.since()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.Entries = append(h.Entries, Entry{At: at, Who: who, Term: term, Format: format, Args: args})
}

func (h *History) started(id string, term uint64) *Leadership {
	l := &Leadership{ID: id, Term: term, Start: h.since(), End: history.Live}
	h.mu.Lock()
	h.Leaderships = append(h.Leaderships, l)
	h.mu.Unlock()
	h.add(id, term, "leader context live")
	return l
}

func (h *History) observed(r tenure.Record) {
	h.mu.Lock()
	h.Observed = append(h.Observed, r)
	h.mu.Unlock()
	h.add("obs", r.Term, "observer sees holder %q", r.Holder)
}

func (h *History) ended(l *Leadership) {
	at := h.since()
	h.mu.Lock()
	if !l.Open() {
		h.mu.Unlock()
		return
	}
	l.End = at
	h.mu.Unlock()
	h.add(l.ID, l.Term, "leader context done")
}

// String renders the history in time order.
func (h *History) String() string {
	h.mu.Lock()
	entries := slices.Clone(h.Entries)
	h.mu.Unlock()
	slices.SortStableFunc(entries, func(a, b Entry) int { return int(a.At - b.At) })
	var b strings.Builder
	for _, e := range entries {
		term := ""
		if e.Term != 0 {
			term = fmt.Sprintf(" term %d", e.Term)
		}
		fmt.Fprintf(&b, "  %12.6fs %-4s%s: %s\n", e.At.Seconds(), e.Who, term, e.What())
	}
	return b.String()
}
