package torture

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const s = time.Second

func iv(id string, term uint64, start, end time.Duration) Interval {
	return Interval{ID: id, Term: term, Start: start, End: end}
}

func TestCheckAcceptsACleanHistory(t *testing.T) {
	h := &History{Duration: 20 * s, TTL: s,
		Intervals: []Interval{iv("a", 1, 0, 5*s), iv("b", 2, 5*s+10*time.Millisecond, 12*s), iv("a", 3, 13*s, Live)},
		Faults:    []Fault{{Kind: FaultKill, Target: "b", At: 12 * s, Healed: 12 * s}},
		Writes:    []Write{{s, "a", 1, true}, {6 * s, "b", 2, true}, {14 * s, "a", 3, true}},
	}
	if vs := Check(h, 2*s); len(vs) != 0 {
		t.Fatalf("violations in a clean history: %v", vs)
	}
	if fo := Failovers(h)[FaultKill]; len(fo) != 1 || fo[0] != s {
		t.Fatalf("failovers = %v, want [1s]", fo)
	}
}

func TestCheckFindsEachViolation(t *testing.T) {
	cases := map[string]*History{
		"terms": {Duration: 10 * s, Intervals: []Interval{iv("a", 2, 0, s), iv("b", 2, 2*s, 3*s)}},
		"overlap": {Duration: 10 * s, Intervals: []Interval{iv("a", 1, 0, 3*s), iv("b", 2, 2*s, 4*s)},
			Faults: []Fault{{Kind: FaultStop, Target: "a", At: s, Healed: 3 * s}}},
		"fencing": {Duration: 10 * s, Intervals: []Interval{iv("a", 1, 0, s), iv("b", 2, s, 2*s)},
			Writes: []Write{{s / 2, "a", 1, true}, {s, "b", 2, true}, {s + 1, "a", 1, true}}},
		"liveness": {Duration: 30 * s, Intervals: []Interval{iv("a", 1, 0, 5*s), iv("b", 2, 20*s, Live)},
			Faults: []Fault{{Kind: FaultKill, Target: "a", At: 5 * s, Healed: 5 * s}}},
	}
	for rule, h := range cases {
		vs := Check(h, 3*s)
		found := false
		for _, v := range vs {
			found = found || v.Rule == rule
		}
		if !found {
			t.Errorf("%s: violation not found; got %v", rule, vs)
		}
	}
}

func TestOverlapExcusedOutsideAssumptions(t *testing.T) {
	h := &History{Duration: 10 * s,
		Intervals: []Interval{iv("a", 1, 0, 4*s), iv("b", 2, 2*s, Live)},
		Faults:    []Fault{{Kind: FaultStopGroup, Target: "a", At: s, Healed: 4 * s, OutsideAssumptions: true}},
		Writes:    []Write{{2 * s, "b", 2, true}, {4 * s, "a", 1, false}},
	}
	if vs := Check(h, 3*s); len(vs) != 0 {
		t.Fatalf("an overlap outside the assumptions, fenced off, was reported: %v", vs)
	}
}

func TestReportRenders(t *testing.T) {
	h := &History{Store: "memory", Seed: 7, Duration: 10 * s, TTL: s,
		Intervals: []Interval{iv("a", 1, 0, 4*s), iv("b", 2, 4*s, Live)},
		Faults:    []Fault{{Kind: FaultKill, Target: "a", At: 4 * s, Healed: 4 * s}},
		Writes:    []Write{{5 * s, "a", 1, false}},
	}
	var sum, svg bytes.Buffer
	Summary(&sum, h, nil)
	if !strings.Contains(sum.String(), "kill") || !strings.Contains(sum.String(), "violations: 0") ||
		!strings.Contains(sum.String(), "1 stale writes fenced off") {
		t.Fatalf("summary misses facts:\n%s", sum.String())
	}
	if err := SVG(&svg, h, nil); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "term 2", "stale write", "kill", "</svg>"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestSummaryNamesTheLatestNotice(t *testing.T) {
	h := &History{Store: "memory", Seed: 7, Duration: 10 * s, TTL: 300 * time.Millisecond,
		Intervals: []Interval{iv("a", 1, 0, 4*s), iv("b", 2, 4*s, 6*s), iv("c", 3, 6*s, Live)},
		Late:      []Late{{"a", 1, 2 * time.Millisecond}, {"b", 2, 124 * time.Millisecond}},
	}
	var sum bytes.Buffer
	Summary(&sum, h, nil)
	if want := "ended by the renew deadline: 2; the latest notice, b term 2's task 124ms after it"; !strings.Contains(sum.String(), want) {
		t.Fatalf("summary lacks %q:\n%s", want, sum.String())
	}
	sum.Reset()
	h.Late = nil
	Summary(&sum, h, nil)
	if strings.Contains(sum.String(), "renew deadline") {
		t.Fatalf("summary speaks of notices none recorded:\n%s", sum.String())
	}
}

// TestReplayCommandNamesThisPackage: the replay command a failing round
// prints names this package's directory relative to the module's root,
// where the command is run, and the round's seed and length; it once named
// ./torture, which does not exist.
func TestReplayCommandNamesThisPackage(t *testing.T) {
	cmd := replayCommand(Config{Seed: 42, Duration: 90 * time.Second}, "TestTortureMemory")
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("../.. is not the module root: %v", err)
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(root, here)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go test ./" + filepath.ToSlash(rel) + " ", "TENURE_TORTURE_SEED=42 ", "TENURE_TORTURE_DURATION=1m30s ", "-run '^TestTortureMemory$'"} {
		if !strings.Contains(cmd, want) {
			t.Errorf("replay command %q lacks %q", cmd, want)
		}
	}
}
