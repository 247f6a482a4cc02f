package main

import (
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
)

// envTimeline names a file to which `tenure run` and its supervisor append
// one line per step of a handoff, "MONO PID STEP" (MONO: CLOCK_MONOTONIC in
// nanoseconds, comparable across processes), one write per line. The
// handoff benchmark sets it to break the handoff down; when it is unset
// (always, outside that benchmark) a step costs one comparison.
const envTimeline = "TENURE_DEBUG_TIMELINE"

// The steps, in handoff order. The old leader: signal (tenure was sent
// one), cmd-exited and exit-sent (its supervisor saw CMD exit and told
// tenure), cmd-gone (tenure knows CMD's group is gone; the elector
// releases next), released (the elector released). The next leader:
// seen-free (its watch showed the key free), acquire-sent and acquired
// (its Acquire), task (the elector started the task), start-sent (the
// supervisor was told to start CMD), start-received and cmd-started (the
// supervisor got that and CMD was exec'd). CMD's own start is CMD's to log.
const (
	stepSignal        = "signal"
	stepCmdExited     = "cmd-exited"
	stepExitSent      = "exit-sent"
	stepCmdGone       = "cmd-gone"
	stepReleased      = "released"
	stepSeenFree      = "seen-free"
	stepAcquireSent   = "acquire-sent"
	stepAcquired      = "acquired"
	stepTask          = "task"
	stepStartSent     = "start-sent"
	stepStartReceived = "start-received"
	stepCmdStarted    = "cmd-started"
)

var timelineFile = sync.OnceValue(func() *os.File {
	path := os.Getenv(envTimeline)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil
	}
	return f
})

// mark records step as happening now, if envTimeline is set.
func mark(step string) { markAt(step, 0) }

// markAt records step as having happened ago, if envTimeline is set.
func markAt(step string, ago time.Duration) {
	f := timelineFile()
	if f == nil {
		return
	}
	line := strconv.FormatInt(monoNow()-int64(ago), 10) + " " + strconv.Itoa(os.Getpid()) + " " + step + "\n"
	_, _ = f.WriteString(line)
}

// markEvent records the elector events that are handoff steps.
func markEvent(ev tenure.Event) {
	for _, m := range eventMarks(ev) {
		markAt(m.step, m.ago)
	}
}

// eventMark is one step an elector event stands for, and how long before
// the event it happened.
type eventMark struct {
	step string
	ago  time.Duration
}

// eventMarks returns the handoff steps ev stands for. A loss is not a
// release: EventLost is reported as the task is cancelled, before the task
// returns and before the lease is given back (if it still can be).
func eventMarks(ev tenure.Event) []eventMark {
	switch {
	case ev.Kind == tenure.EventLeaderChanged && ev.Holder == "":
		return []eventMark{{step: stepSeenFree}}
	case ev.Kind == tenure.EventAcquired:
		return []eventMark{{stepAcquireSent, ev.Took}, {step: stepAcquired}}
	case ev.Kind == tenure.EventReleased:
		return []eventMark{{step: stepReleased}}
	}
	return nil
}
