package httpview

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// TestJSONKeepsTerminalRunesEscaped: a holder or value written into the
// store from outside can hold runes a terminal obeys or reorders text by
// (a C1 control such as CSI, a bidi override, a zero-width space). GET /,
// /healthz and /events, which an operator may read with curl, write them
// as \u escapes, which decode to the same strings.
func TestJSONKeepsTerminalRunesEscaped(t *testing.T) {
	const hostile = "good\u202edoog\u200b\u009b31m"
	raw := func(b []byte) bool {
		return bytes.ContainsFunc(b, func(r rune) bool { return r == '\u202e' || r == '\u200b' || r == '\u009b' })
	}
	view := mustNew(t, Options{Key: key, Store: memory.New(nil), Logger: slog.New(slog.DiscardHandler)})
	events := openEvents(t, view)
	view.Observe(tenure.Record{Key: key, Holder: hostile, Term: 1, TTL: time.Second, Value: hostile})

	for _, target := range []string{"/", "/healthz?standbyok"} {
		if w := get(t, view, target, "application/json"); raw(w.Body.Bytes()) {
			t.Errorf("GET %s writes the runes raw: %q", target, w.Body)
		}
	}
	if l := leaderOf(t, view); l.Name != hostile || l.Value != hostile {
		t.Errorf("GET / decodes to name %q, value %q; want %q for both", l.Name, l.Value, hostile)
	}
	for events.lines.Scan() {
		line, ok := bytes.CutPrefix(events.lines.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if raw(line) {
			t.Fatalf("/events writes the runes raw: %q", line)
		}
		var l Leader
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("event data: %v", err)
		}
		if l.Name == hostile {
			return
		}
	}
	t.Fatalf("/events ended before it showed %q: %v", hostile, events.lines.Err())
}
