package torture

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// budget returns the run time of one store's torture run: short by default
// so the test command stays bounded, TENURE_TORTURE_DURATION for longer runs.
func budget(t *testing.T, def time.Duration) time.Duration {
	if v := os.Getenv("TENURE_TORTURE_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("TENURE_TORTURE_DURATION=%q: %v", v, err)
		}
		return d
	}
	return def
}

// replayCommand is the command, run from the module's root, that replays
// the round c of test name: the same seed and, since the fault schedule is
// drawn over the round's length, the same TENURE_TORTURE_DURATION.
func replayCommand(c Config, name string) string {
	return fmt.Sprintf("TENURE_TORTURE_SEED=%d TENURE_TORTURE_DURATION=%s go test ./internal/torture -run '^%s$' -v",
		c.Seed, c.Duration, name)
}

// seed returns TENURE_TORTURE_SEED, or a fresh seed that is printed.
func seed(t *testing.T) int64 {
	if v := os.Getenv("TENURE_TORTURE_SEED"); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("TENURE_TORTURE_SEED=%q: %v", v, err)
		}
		return s
	}
	return time.Now().UnixNano() % 1_000_000
}

// torture runs d, checks the history, writes the summary and the SVG
// timeline (to TENURE_TORTURE_OUT if set), and fails with the replay command
// on any violation.
func torture(t *testing.T, d Driver, c Config, failoverBound time.Duration) *History {
	t.Helper()
	c.Log, c.Bound = t.Logf, failoverBound
	h, err := Run(context.Background(), d, c)
	if err != nil {
		t.Fatalf("seed %d: %v", c.Seed, err)
	}
	vs := Check(h, failoverBound)
	var sum bytes.Buffer
	Summary(&sum, h, vs)
	t.Logf("\n%s", sum.String())
	if dir := os.Getenv("TENURE_TORTURE_OUT"); dir != "" {
		var svg bytes.Buffer
		if err := SVG(&svg, h, vs); err != nil {
			t.Fatal(err)
		}
		base := filepath.Join(dir, "torture-"+h.Store)
		_ = os.WriteFile(base+".svg", svg.Bytes(), 0o644)
		_ = os.WriteFile(base+".txt", sum.Bytes(), 0o644)
	}
	if len(vs) > 0 {
		t.Fatalf("seed %d: %d violations; replay with: %s", c.Seed, len(vs), replayCommand(c, t.Name()))
	}
	if len(h.Faults) == 0 {
		t.Fatalf("seed %d: no fault was injected in %s", c.Seed, h.Duration)
	}
	return h
}

func TestTortureMemory(t *testing.T) {
	t.Parallel()
	ttl := 300 * time.Millisecond
	shared := memory.New(nil)
	s := seed(t)
	d := &InProcess{
		StoreName: "memory", N: 4, TTL: ttl, Seed: s,
		Open: func() (tenure.Store, error) { return shared.Handle(), nil },
	}
	torture(t, d, Config{Seed: s, Duration: budget(t, 15*time.Second), TTL: ttl, Gap: 2 * ttl, FaultFor: 2 * ttl},
		ttl*3)
}
