package demoworker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheck(t *testing.T) {
	start := func(pid int, term uint64, mono int64, overlap bool) Event {
		return Event{Kind: "start", ID: "n", Term: term, Mono: mono, PID: pid, Overlap: overlap}
	}
	stop := func(pid int, mono int64) Event { return Event{Kind: "stop", Mono: mono, PID: pid} }
	cases := []struct {
		name      string
		evs       []Event
		overlaps  int
		termsGrow bool
	}{
		{"sequential", []Event{start(1, 1, 10, false), stop(1, 20), start(2, 2, 30, false), stop(2, 40)}, 0, true},
		{"killed, no stop line", []Event{start(1, 1, 10, false), start(2, 2, 30, false)}, 0, true},
		{"lock says overlap", []Event{start(1, 1, 10, false), start(2, 2, 30, true)}, 1, true},
		{"intervals overlap", []Event{start(1, 1, 10, false), start(2, 2, 15, false), stop(1, 20), stop(2, 40)}, 1, true},
		{"term repeated", []Event{start(1, 3, 10, false), stop(1, 20), start(2, 3, 30, false)}, 0, false},
		{"term went back", []Event{start(1, 3, 10, false), stop(1, 20), start(2, 2, 30, false)}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := Check(tc.evs)
			if h.Overlaps != tc.overlaps || h.TermsGrow != tc.termsGrow {
				t.Fatalf("Check = %+v, want %d overlaps, terms grow %v", h, tc.overlaps, tc.termsGrow)
			}
		})
	}
}

func TestParse(t *testing.T) {
	e, err := Parse("start node-2 7 123456 42 overlap")
	if err != nil || e != (Event{Kind: "start", ID: "node-2", Term: 7, Mono: 123456, PID: 42, Overlap: true}) {
		t.Fatalf("Parse = %+v, %v", e, err)
	}
	e, err = Parse("stop node-2 7 123999 42")
	if err != nil || e.Kind != "stop" || e.Mono != 123999 {
		t.Fatalf("Parse = %+v, %v", e, err)
	}
	for _, bad := range []string{"", "begin a 1 2 3", "start a x 2 3", "start a 1 2"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

// TestRunReportsOverlap: a worker started while another holds the lock
// says so in its start line, and logs start and stop with growing times.
func TestRunReportsOverlap(t *testing.T) {
	dir := t.TempDir()
	events, lock := filepath.Join(dir, "events"), filepath.Join(dir, "lock")
	if err := os.WriteFile(events, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TENURE_ID", "node-1")
	t.Setenv("TENURE_TERM", "5")
	run := func() []Event {
		var stdout, stderr bytes.Buffer
		if code := Run(context.Background(), []string{"--events", events, "--lock", lock, "--exit-after", "1ms"}, &stdout, &stderr); code != 0 {
			t.Fatalf("Run exited %d: %s", code, stderr.String())
		}
		data, err := os.ReadFile(events)
		if err != nil {
			t.Fatal(err)
		}
		var evs []Event
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			e, err := Parse(l)
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, e)
		}
		return evs
	}
	evs := run()
	if len(evs) != 2 || evs[0].Overlap || evs[0].Term != 5 || evs[0].ID != "node-1" || evs[1].Mono < evs[0].Mono {
		t.Fatalf("alone: events %+v", evs)
	}
	held, err := os.OpenFile(lock, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := unix.Flock(int(held.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if evs = run(); len(evs) != 4 || !evs[2].Overlap {
		t.Fatalf("with the lock held elsewhere: events %+v, want the third to say overlap", evs)
	}
}
