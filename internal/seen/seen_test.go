package seen

import (
	"math"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

func TestTermsKeepTheHighest(t *testing.T) {
	var s Terms
	s.Observe("k", 5, time.Second)
	s.Observe("k", 3, time.Hour) // older news
	s.Observe("k", 5, 2*time.Second)
	if g := s.Highest("k"); g.Term != 5 || g.TTL != 2*time.Second {
		t.Fatalf("Highest = %+v, want term 5 TTL 2s", g)
	}
	// A free key whose data was deleted reads at the last term seen.
	if r := s.Record(tenure.Record{Key: "k"}); r.Term != 5 || r.Held() {
		t.Fatalf("Record of a wiped key = %+v, want free at term 5", r)
	}
	// A held record is the truth, whatever its term.
	if r := s.Record(tenure.Record{Key: "k", Holder: "x", Term: 1}); r.Term != 1 {
		t.Fatalf("Record of a held key = %+v, want its own term", r)
	}
	if w := Wait(time.Second); w < time.Second {
		t.Fatalf("Wait(1s) = %s, below the window it covers", w)
	}
	if w := Wait(0); w != 0 {
		t.Fatalf("Wait(0) = %s", w)
	}
}

func TestWaitSinceCoversTheTimeBeforeTheJudgement(t *testing.T) {
	sent := time.Now().Add(-time.Second) // Acquire entered a second ago
	if w := WaitSince(sent, 2*time.Second); w < 3*time.Second {
		t.Fatalf("WaitSince = %s, want at least the window plus the second before it was judged", w)
	}
	if w := WaitSince(sent, 0); w != 0 {
		t.Fatalf("WaitSince with no window = %s, want 0", w)
	}
}

func TestNextNeverWraps(t *testing.T) {
	if n, ok := Next(3, 7, 5); n != 8 || !ok {
		t.Fatalf("Next(3, 7, 5) = %d, %v; want 8, true", n, ok)
	}
	if n, ok := Next(); n != 1 || !ok {
		t.Fatalf("Next() = %d, %v; want 1, true", n, ok)
	}
	if n, ok := Next(1, math.MaxUint64); ok {
		t.Fatalf("Next(1, MaxUint64) = %d, true; want false", n)
	}
}

// A window read from a record written from outside can be anything, up to
// the largest Duration: the Wait covering it must not overflow to zero.
func TestWaitSaturates(t *testing.T) {
	sent := time.Now().Add(-time.Second)
	for _, window := range []time.Duration{math.MaxInt64, math.MaxInt64 - time.Millisecond, math.MaxInt64 / 50 * 49} {
		if w := WaitSince(sent, window); w < window {
			t.Errorf("WaitSince(a second ago, %d) = %s, below the window", window, w)
		}
		if w := Wait(window); w < window {
			t.Errorf("Wait(%d) = %s, below the window", window, w)
		}
	}
}

// A record written from outside can carry a negative TTL (ZooKeeper
// ttl_ns -5, Redis ttl_ns -1000): Record reports no negative TTL or
// Remaining, which tenure.Record defines as durations.
func TestRecordHasNoNegativeDurations(t *testing.T) {
	var s Terms
	r := s.Record(tenure.Record{Key: "k", Holder: "x", Term: 3, TTL: -5, Remaining: -5})
	if r.TTL < 0 || r.Remaining < 0 || r.Holder != "x" || r.Term != 3 {
		t.Fatalf("Record of a held grant with TTL -5ns = %+v, want it held at term 3 without negative durations", r)
	}
}
