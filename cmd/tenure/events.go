package main

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// eventLog collects the lines workers write to a FIFO, as they are written,
// and lets a reader wait for the next one. Safe for concurrent use.
type eventLog struct {
	f *os.File

	mu      sync.Mutex
	evs     []workerEvent
	bad     []string
	changed chan struct{} // closed and replaced on each new event
}

// newEventLog makes a FIFO at path and starts reading it. It opens the FIFO
// read-write, so writers never block on opening it and it never reports
// end of file while the log lives.
func newEventLog(path string) (*eventLog, error) {
	if err := unix.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("mkfifo %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	l := &eventLog{f: f, changed: make(chan struct{})}
	go l.read()
	return l, nil
}

func (l *eventLog) read() {
	sc := bufio.NewScanner(l.f)
	for sc.Scan() {
		ev, err := parseEvent(sc.Text())
		l.mu.Lock()
		if err != nil {
			l.bad = append(l.bad, sc.Text())
		} else {
			l.evs = append(l.evs, ev)
		}
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
}

// Close stops reading.
func (l *eventLog) Close() error { return l.f.Close() }

// events returns a copy of the events so far.
func (l *eventLog) events() []workerEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]workerEvent(nil), l.evs...)
}

// waitFor waits until an event from index from on satisfies ok, and returns
// it and its index, or false after timeout.
func (l *eventLog) waitFor(from int, timeout time.Duration, ok func(workerEvent) bool) (workerEvent, int, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		l.mu.Lock()
		for i := from; i < len(l.evs); i++ {
			if ok(l.evs[i]) {
				ev := l.evs[i]
				l.mu.Unlock()
				return ev, i, true
			}
		}
		from = len(l.evs)
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-t.C:
			return workerEvent{}, 0, false
		}
	}
}

// nextStart waits for the first start event at index from or later.
func (l *eventLog) nextStart(from int, timeout time.Duration) (workerEvent, int, bool) {
	return l.waitFor(from, timeout, func(e workerEvent) bool { return e.Kind == "start" })
}

// length is the number of events so far.
func (l *eventLog) length() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.evs)
}
