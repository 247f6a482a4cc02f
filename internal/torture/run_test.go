package torture

import (
	"context"
	"testing"
	"time"
)

// leaderless is a Driver whose one candidate leads from the start and
// never again once killed: no heal is ever followed by a leader.
type leaderless struct{ ended func() }

func (d *leaderless) Name() string { return "leaderless" }
func (d *leaderless) Start(_ context.Context, rec *Recorder) ([]string, error) {
	d.ended = rec.Began("a", 1)
	return []string{"a"}, nil
}
func (d *leaderless) Kinds() []FaultKind { return []FaultKind{FaultKill} }
func (d *leaderless) Inject(context.Context, FaultKind, string) (func() error, bool, error) {
	d.ended()
	return nil, false, nil
}
func (d *leaderless) Stop() error { return nil }

// TestRunLetsEveryHealBeJudged: Run holds the next fault back until a
// leader runs or Config.Bound has passed since the last heal, so Check
// judges every heal but one near the end of the run. With faults a Gap
// apart and a Gap shorter than the bound (every process round's), the
// next fault came first and no heal but the last was judged: a store that
// never elected again after a fault passed.
func TestRunLetsEveryHealBeJudged(t *testing.T) {
	const bound = 150 * time.Millisecond
	h, err := Run(context.Background(), &leaderless{}, Config{Seed: 1, Duration: time.Second,
		TTL: 10 * time.Millisecond, Gap: 20 * time.Millisecond, Bound: bound})
	if err != nil {
		t.Fatal(err)
	}
	judged := 0
	for _, f := range h.Faults {
		if _, ok := h.ledAfter(h.sorted(), f, bound); ok {
			judged++
		}
	}
	if len(h.Faults) < 3 || judged < len(h.Faults)-1 {
		t.Fatalf("%d faults, %d heals judged; want every heal judged but the last", len(h.Faults), judged)
	}
	live := 0
	for _, v := range Check(h, bound) {
		if v.Rule == "liveness" {
			live++
		}
	}
	if live != judged {
		t.Fatalf("%d liveness violations for %d judged heals with no leader after any", live, judged)
	}
}
