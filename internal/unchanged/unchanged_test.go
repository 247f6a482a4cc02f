package unchanged

import (
	"testing"
	"time"
)

func TestSinceCountsFromTheFirstSightingOfAVersion(t *testing.T) {
	var tr Tracker[uint64]
	t0 := time.Unix(100, 0)
	for _, step := range []struct {
		key  string
		v    uint64
		at   time.Duration
		want time.Duration
	}{
		{"a", 7, 0, 0},
		{"a", 7, 3 * time.Second, 3 * time.Second},
		{"b", 7, 4 * time.Second, 0}, // keys are apart
		{"a", 8, 5 * time.Second, 0}, // a new version starts again
		{"a", 8, 9 * time.Second, 4 * time.Second},
	} {
		if got := tr.Since(step.key, step.v, t0.Add(step.at)); got != step.want {
			t.Errorf("Since(%s, %d) at +%s = %s, want %s", step.key, step.v, step.at, got, step.want)
		}
	}
	tr.Forget("a")
	if got := tr.Since("a", 8, t0.Add(10*time.Second)); got != 0 {
		t.Errorf("after Forget: %s, want 0 (a first sighting)", got)
	}
}
