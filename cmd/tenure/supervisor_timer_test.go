package main

import (
	"testing"
	"time"
)

// A deadline timer fires once its instant has come, never at an instant
// it was moved away from, and at once for an instant already past: what
// the supervisor's enforcement of the lease deadline relies on.
func TestDeadlineTimer(t *testing.T) {
	start := monoNow()
	dt, err := newDeadlineTimer(start + int64(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	later := start + int64(200*time.Millisecond)
	if err := dt.Set(later); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dt.C:
		if now := monoNow(); now < later {
			t.Fatalf("fired %v before the instant it was moved to", time.Duration(later-now))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("did not fire within 10 s of an instant 200 ms away")
	}

	if err := dt.Set(monoNow() - int64(time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dt.C:
	case <-time.After(10 * time.Second):
		t.Fatal("an instant already past did not fire")
	}

	// Moved far away before its instant: it must stay silent.
	if err := dt.Set(monoNow() + int64(50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := dt.Set(monoNow() + int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dt.C:
		t.Fatal("fired at an instant it had been moved away from")
	case <-time.After(300 * time.Millisecond):
	}
}
