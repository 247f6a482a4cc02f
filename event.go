package tenure

import "time"

// EventKind says what an [Event] reports.
type EventKind int

const (
	// EventElected: this candidate was granted the lease; Term is set.
	EventElected EventKind = iota + 1
	// EventLost: leadership was taken from this candidate or became
	// doubtful, and its task was cancelled; Err says why: an error matching
	// [ErrLost], [ErrRenewDeadline] or [ErrStalled]. It is reported as the
	// task is cancelled, before the task returns (an [EventTaskOverrun]
	// follows if it is late) and before the lease is given back.
	EventLost
	// EventLeaderChanged: the key's holder changed, as seen by a candidate
	// while campaigning; Holder is "" when nobody leads.
	EventLeaderChanged
	// EventRenewFailed: one renewal failed with a transient error; the
	// elector retries until the renew deadline. Err is the store's error.
	EventRenewFailed
	// EventTaskOverrun: the task did not return within
	// [Config.StopTimeout] after its context was cancelled. Until it
	// returns, it may act without holding the lease; fencing is what
	// protects the resource then.
	EventTaskOverrun
	// EventAcquired: an Acquire of the key was granted; Took is its
	// round trip. EventElected follows once the grant's Wait is over.
	EventAcquired
	// EventAcquireFailed: an Acquire of the key granted nothing; Err is a
	// *[HeldError] when somebody holds the key, else the store's error.
	// Took is the round trip.
	EventAcquireFailed
	// EventRenewed: a renewal succeeded in time and moved the renew
	// deadline; Took is its round trip.
	EventRenewed
	// EventReleased: this candidate gave its term up and released the
	// lease: its task returned while it led (Err is nil), the context
	// of Run or Do ended (Err is the context's error), or it stepped down
	// on request (Err matches [ErrSteppedDown]).
	EventReleased
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
	case EventReleased:
		return "released"
	case EventAcquired:
		return "acquired"
	case EventAcquireFailed:
		return "acquire-failed"
	case EventRenewed:
		return "renewed"
	}
	return "unknown"
}

// Event is one thing that happened to an elector.
type Event struct {
	Kind     EventKind
	Time     time.Time
	Key      string
	Identity string // this candidate
	Term     uint64 // the term concerned, if any
	Holder   string // EventLeaderChanged: the new holder, "" for none
	Err      error  // EventLost, EventReleased, EventRenewFailed, EventAcquireFailed: the reason
	// Took is the round trip of the store request an EventAcquired,
	// EventAcquireFailed or EventRenewed reports.
	Took time.Duration
}
