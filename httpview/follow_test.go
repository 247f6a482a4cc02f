package httpview

import (
	"context"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// TestFollowFedRecords: a view fed by its caller's records (Follow) shows
// them, ignores other keys' records, and when the records end it returns
// nil and ends the /events streams.
func TestFollowFedRecords(t *testing.T) {
	h := mustNew(t, Options{Key: key, Store: memory.New(nil)})
	records := make(chan tenure.Record)
	done := make(chan error, 1)
	go func() { done <- h.Follow(context.Background(), records) }()
	s := openEvents(t, h)
	s.next(t) // subscribed: the current view
	records <- tenure.Record{Key: key, Holder: "a", Term: 4, TTL: time.Second, Value: "v"}
	records <- tenure.Record{Key: "other", Holder: "x", Term: 9}
	records <- tenure.Record{Key: key, Holder: "a", Term: 4} // a repeat: received only once the first was applied
	if l := h.Current(); l.Name != "a" || l.Term != 4 || l.Value != "v" {
		t.Fatalf("the view after Follow got a record: %+v, want a in term 4 with value v", l)
	}
	close(records)
	if err := <-done; err != nil {
		t.Fatalf("Follow returned %v after its records ended, want nil", err)
	}
	for s.lines.Scan() { // the stream ends
	}
	if n := h.clientCount(); n != 0 {
		t.Fatalf("%d /events streams still open after Follow returned", n)
	}
}

// TestLeaseDurationFromALaterRecord: a follower's elector reports a new
// leader (EventLeaderChanged, which carries no TTL) before the store's
// record of the same term does; the view takes the lease's TTL from that
// record instead of serving lease_duration 0 for the whole term.
func TestLeaseDurationFromALaterRecord(t *testing.T) {
	h := mustNew(t, Options{Key: key, Store: memory.New(nil)})
	h.OnEvent(nil)(tenure.Event{Kind: tenure.EventLeaderChanged, Key: key, Holder: "a", Term: 3, Time: time.Now()})
	if l := h.Current(); l.Name != "a" || l.Term != 3 {
		t.Fatalf("the view after the elector's event: %+v, want a in term 3", l)
	}
	records := make(chan tenure.Record)
	done := make(chan error, 1)
	go func() { done <- h.Follow(context.Background(), records) }()
	records <- tenure.Record{Key: key, Holder: "a", Term: 3, TTL: 10 * time.Second}
	records <- tenure.Record{Key: key, Holder: "a", Term: 3, TTL: 10 * time.Second} // received once the first was applied
	if l := h.Current(); l.LeaseDuration != 10 {
		t.Errorf("lease_duration after the store's record = %v, want 10 (seconds)", l.LeaseDuration)
	}
	close(records)
	if err := <-done; err != nil {
		t.Fatalf("Follow returned %v", err)
	}
}
