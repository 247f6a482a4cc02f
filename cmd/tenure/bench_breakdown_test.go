package main

import (
	"bufio"
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// handoff is one measured handoff, in CLOCK_MONOTONIC ns: from t0 (the
// signal sent, or the leader's CMD exiting) to end (the next leader's CMD
// logging its start).
type handoff struct{ t0, end int64 }

func durations(h []handoff) []time.Duration {
	d := make([]time.Duration, len(h))
	for i, x := range h {
		d[i] = time.Duration(x.end - x.t0)
	}
	return d
}

// breakdownSteps are the steps a SIGTERM handoff goes through, in order:
// the timeline steps of the tenure processes (see timeline.go) and the
// worker's own stop and start lines (CMD's view: "cmd stop line" is
// written when it got SIGTERM, "CMD start" when its main began).
var breakdownSteps = []string{
	stepSignal, "cmd stop line", stepCmdExited, stepExitSent, stepCmdGone, stepReleased,
	stepSeenFree, stepAcquireSent, stepAcquired, stepTask, stepStartSent,
	stepStartReceived, stepCmdStarted, "CMD start",
}

// timelineMark is one line of an envTimeline file.
type timelineMark struct {
	mono int64
	step string
}

// readTimeline reads an envTimeline file, in no particular order.
func readTimeline(b testing.TB, path string) []timelineMark {
	f, err := os.Open(path)
	if err != nil {
		b.Fatalf("timeline: %v", err)
	}
	defer f.Close()
	var out []timelineMark
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			continue
		}
		mono, err := strconv.ParseInt(fields[0], 10, 64)
		if err == nil {
			out = append(out, timelineMark{mono, fields[2]})
		}
	}
	return out
}

// breakdown returns, per handoff, the time from its t0 to the first
// occurrence of each step within it (absent: never seen in it).
func breakdown(marks []timelineMark, evs []workerEvent, hs []handoff) []map[string]time.Duration {
	for _, e := range evs {
		if e.Kind == "stop" {
			marks = append(marks, timelineMark{e.Mono, "cmd stop line"})
		}
	}
	slices.SortFunc(marks, func(a, b timelineMark) int { return cmp.Compare(a.mono, b.mono) })
	out := make([]map[string]time.Duration, len(hs))
	for i, h := range hs {
		at := map[string]time.Duration{"CMD start": time.Duration(h.end - h.t0)}
		for _, m := range marks {
			if _, seen := at[m.step]; !seen && m.mono >= h.t0 && m.mono <= h.end {
				at[m.step] = time.Duration(m.mono - h.t0)
			}
		}
		out[i] = at
	}
	return out
}

// printBreakdown prints, for each step seen, the median time from t0 to
// it and the median of its own share: the time from the step before it,
// in the handoffs that had both.
func printBreakdown(title string, hs []map[string]time.Duration) {
	fmt.Printf("    %s: median from t0 to the step, median step\n", title)
	prev := ""
	for _, s := range breakdownSteps {
		var at, step []time.Duration
		for _, h := range hs {
			d, ok := h[s]
			if !ok {
				continue
			}
			at = append(at, d)
			if p, ok := h[prev]; ok {
				step = append(step, d-p)
			}
		}
		if len(at) == 0 {
			continue
		}
		share := ""
		if len(step) > 0 {
			share = "+" + ms(pct(step, 50))
		}
		fmt.Printf("      %-16s %9s %10s  (%d of %d)\n", s, ms(pct(at, 50)), share, len(at), len(hs))
		prev = s
	}
}
