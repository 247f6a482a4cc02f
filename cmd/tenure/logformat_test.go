package main

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestJSONLogDurationsAreText: --log-format json gives durations as the
// text lines and the flags do ("1.5s"), not as slog's default count of
// nanoseconds (1500000000), also inside a group.
func TestJSONLogDurationsAreText(t *testing.T) {
	var buf strings.Builder
	logger, err := newLogger(&buf, "json", slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("peer: holding back after a step-down", "window", 1500*time.Millisecond,
		slog.Group("timing", "retry_in", 250*time.Millisecond), "term", 7)
	var line struct {
		Window string
		Timing struct {
			RetryIn string `json:"retry_in"`
		}
		Term int
	}
	if err := json.Unmarshal([]byte(buf.String()), &line); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	if line.Window != "1.5s" || line.Timing.RetryIn != "250ms" || line.Term != 7 {
		t.Fatalf("JSON log line %q: want window \"1.5s\", timing.retry_in \"250ms\", term 7", buf.String())
	}
}
