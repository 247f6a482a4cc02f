package raft

import (
	"context"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
)

// repeatWindow is how long a slogWriter holds back lines like one it
// passed on: hashicorp/raft logs each failed heartbeat and append to an
// unreachable member, four lines a second for as long as it is down.
const repeatWindow = time.Minute

// maxRepeatKinds bounds the kinds of line a slogWriter remembers; past it,
// it forgets them all and starts over (a line may then pass early).
const maxRepeatKinds = 256

// slogWriter hands each line raft logs to a slog logger, at error level
// for raft's errors and warning level otherwise. Of lines of one kind
// (the same message about the same member; see lineKind) it passes the
// first, then at most one per repeatWindow, with "repeated" = how many it
// held back since the last one it passed. Safe for concurrent use.
type slogWriter struct {
	l   *slog.Logger
	now func() time.Time

	mu    sync.Mutex
	kinds map[string]*repeats
}

// repeats is what a slogWriter knows of one kind of line.
type repeats struct {
	passed time.Time // when the last line of the kind was passed on
	held   int       // lines of the kind held back since
}

func newSlogWriter(l *slog.Logger, now func() time.Time) *slogWriter {
	return &slogWriter{l: l, now: now, kinds: make(map[string]*repeats)}
}

func (w *slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if rest, ok := strings.CutPrefix(line, "[ERROR]"); ok {
		level, line = slog.LevelError, strings.TrimSpace(rest)
	} else {
		line = strings.TrimSpace(strings.TrimPrefix(line, "[WARN]"))
	}
	held, pass := w.count(lineKind(line))
	if !pass {
		return len(p), nil
	}
	if held > 0 {
		w.l.Log(context.Background(), level, line, "repeated", held)
	} else {
		w.l.Log(context.Background(), level, line)
	}
	return len(p), nil
}

// count notes a line of kind k and says whether to pass it on, and how
// many of its kind were held back before it.
func (w *slogWriter) count(k string) (held int, pass bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	r, ok := w.kinds[k]
	if !ok {
		if len(w.kinds) >= maxRepeatKinds {
			clear(w.kinds)
		}
		w.kinds[k] = &repeats{passed: now}
		return 0, true
	}
	if now.Sub(r.passed) < repeatWindow {
		r.held++
		return 0, false
	}
	held, r.passed, r.held = r.held, now, 0
	return held, true
}

// varying matches the parts of a raft log line that change from one
// repeat to the next: the backoff it waits, the time since it last heard
// from a member, the error it got, and the address a refused connection
// came from (so that connections that fail to authenticate, from any
// number of source ports or hosts, are one kind: a flood of them cannot
// flood the log).
var varying = regexp.MustCompile(` (backoff time=\S+|time=\S+|remote=\S+|error=.*)`)

// lineKind is line without the parts that vary between repeats: the
// message and the member it is about.
func lineKind(line string) string { return varying.ReplaceAllString(line, "") }
