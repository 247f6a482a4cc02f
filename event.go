package tenure

import "time"

// EventKind says what an [Event] reports.
type EventKind int

const (
	// EventElected: this candidate was granted the lease; Term is set.
	EventElected EventKind = iota + 1
	// EventLost: this candidate stopped leading; Err says why (nil when the
	// task returned and the lease was released, else an error matching
	// [ErrLost], [ErrRenewDeadline], [ErrStalled] or the context's error).
	EventLost
	// EventLeaderChanged: the key's holder changed, as seen by a candidate
	// while campaigning or by an [Observer]; Leader is "" when nobody leads.
	EventLeaderChanged
	// EventRenewFailed: one renewal failed with a transient error; the
	// elector retries until the renew deadline. Err is the store's error.
	EventRenewFailed
	// EventTaskOverrun: the task did not return within
	// [Config.StopTimeout] after its context was cancelled. Until it
	// returns, it may act without holding the lease; fencing is what
	// protects the resource then.
	EventTaskOverrun
)

func (k EventKind) String() string {
	switch k {
	case EventElected:
		return "elected"
	case EventLost:
		return "lost"
	case EventLeaderChanged:
		return "leader-changed"
	case EventRenewFailed:
		return "renew-failed"
	case EventTaskOverrun:
		return "task-overrun"
	}
	return "unknown"
}

// Event is one thing that happened to an elector or observer.
type Event struct {
	Kind     EventKind
	Time     time.Time
	Key      string
	Identity string // this candidate
	Term     uint64 // the term concerned, if any
	Leader   string // EventLeaderChanged: the new holder, "" for none
	Err      error  // EventLost, EventRenewFailed: the reason
}
