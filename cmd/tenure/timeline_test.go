package main

import (
	"cmp"
	"slices"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// With TENURE_DEBUG_TIMELINE set, one run of CMD records the steps of its
// term, from both tenure and its supervisor, in the order they happen.
func TestTimelineRecordsATermsSteps(t *testing.T) {
	path := t.TempDir() + "/timeline"
	t.Setenv(envTimeline, path)
	r := runTenure(t, "run", "--store", "file://"+t.TempDir(), "--key", "job", "--quiet", "--", "true")
	if r.code != 0 {
		t.Fatalf("tenure run: code %d, stderr %s", r.code, r.stderr)
	}
	marks := readTimeline(t, path)
	slices.SortStableFunc(marks, func(a, b timelineMark) int { return cmp.Compare(a.mono, b.mono) })
	var got []string
	for _, m := range marks {
		got = append(got, m.step)
	}
	// The next leader's steps and the old leader's, as one process that
	// leads once and exits goes through them; a free key is never "seen"
	// free by a first candidate (nothing changed), and no signal came.
	want := []string{stepAcquireSent, stepAcquired, stepTask, stepStartReceived, stepStartSent, stepCmdStarted,
		stepCmdExited, stepExitSent, stepCmdGone, stepReleased}
	for _, s := range want {
		if !slices.Contains(got, s) {
			t.Fatalf("timeline %v lacks %q", got, s)
		}
	}
	before := func(a, b string) bool { return slices.Index(got, a) < slices.Index(got, b) }
	for _, p := range [][2]string{{stepAcquired, stepTask}, {stepTask, stepStartReceived}, {stepStartReceived, stepCmdStarted},
		{stepCmdStarted, stepCmdExited}, {stepCmdExited, stepCmdGone}, {stepCmdGone, stepReleased}} {
		if !before(p[0], p[1]) {
			t.Errorf("timeline %v: %s not before %s", got, p[0], p[1])
		}
	}
}

// breakdown places each step within the handoff it belongs to, by time.
func TestBreakdown(t *testing.T) {
	marks := []timelineMark{{150, stepReleased}, {105, stepSignal}, {250, stepSignal}, {290, stepReleased}, {120, stepReleased}}
	evs := []workerEvent{{Kind: "stop", Mono: 110}, {Kind: "start", Mono: 200}, {Kind: "stop", Mono: 260}}
	got := breakdown(marks, evs, []handoff{{100, 200}, {250, 300}})
	want := []map[string]time.Duration{
		{stepSignal: 5, "cmd stop line": 10, stepReleased: 20, "CMD start": 100},
		{stepSignal: 0, "cmd stop line": 10, stepReleased: 40, "CMD start": 50},
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("handoff %d: %v, want %v", i, got[i], want[i])
		}
		for k, v := range want[i] {
			if got[i][k] != v {
				t.Errorf("handoff %d step %s: %v, want %v", i, k, got[i][k], v)
			}
		}
	}
}

// Only a release is marked as one: a loss is reported as the task is
// cancelled, before the task returns and before the lease is given back,
// so marking it "released" would put the release before CMD had stopped.
func TestEventMarks(t *testing.T) {
	for _, c := range []struct {
		ev   tenure.Event
		want []string
	}{
		{tenure.Event{Kind: tenure.EventReleased}, []string{stepReleased}},
		{tenure.Event{Kind: tenure.EventLost, Err: tenure.ErrLost}, nil},
		{tenure.Event{Kind: tenure.EventAcquired, Took: time.Millisecond}, []string{stepAcquireSent, stepAcquired}},
		{tenure.Event{Kind: tenure.EventLeaderChanged}, []string{stepSeenFree}},
		{tenure.Event{Kind: tenure.EventLeaderChanged, Holder: "b"}, nil},
		{tenure.Event{Kind: tenure.EventRenewed}, nil},
	} {
		var got []string
		for _, m := range eventMarks(c.ev) {
			got = append(got, m.step)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%v: steps %v, want %v", c.ev.Kind, got, c.want)
		}
	}
}
