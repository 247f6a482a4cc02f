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

// TestFollowAfterAForgedHigherTerm: a term written far above the key's
// counter (HSET term 1000000 on Redis), then a real grant at the
// counter's next term. The Observer delivers that older term once the
// store showed it for a TTL (its records are past its stale-news filter),
// so the view must show it, and count it as a transition, instead of the
// forged term's holder for good; /events must announce it. An elector's
// event and a record of an older term merely read late stay ignored.
func TestFollowAfterAForgedHigherTerm(t *testing.T) {
	h := mustNew(t, Options{Key: key, Store: memory.New(nil)})
	records := make(chan tenure.Record)
	done := make(chan error, 1)
	go func() { done <- h.Follow(context.Background(), records) }()
	s := openEvents(t, h)
	s.next(t) // subscribed: the current view
	feed := func(rs ...tenure.Record) {
		for _, r := range rs {
			records <- r
		}
		records <- rs[len(rs)-1] // a repeat: received only once the last was applied
	}
	feed(tenure.Record{Key: key, Holder: "alpha", Term: 3, TTL: time.Second},
		tenure.Record{Key: key, Holder: "alpha", Term: 1000000, TTL: time.Second})
	s.next(t)
	s.next(t)
	feed(tenure.Record{Key: key, Holder: "beta", Term: 4, TTL: time.Minute})
	if l := h.Current(); l.Name != "beta" || l.Term != 4 || l.Transitions != 2 || l.LeaseDuration != 60 {
		t.Fatalf("the view after the observer delivered beta's grant in term 4, below the forged term: %+v, want beta in term 4 with 2 transitions and lease_duration 60", l)
	}
	if _, l := s.next(t); l.Name != "beta" || l.Term != 4 {
		t.Fatalf("/events after beta's grant: %+v, want beta in term 4", l)
	}
	// From there, as ever: an elector's newer news, then a record of
	// beta's term read before it, which is not news.
	h.OnEvent(nil)(tenure.Event{Kind: tenure.EventLeaderChanged, Key: key, Holder: "gamma", Term: 5, Time: time.Now()})
	feed(tenure.Record{Key: key, Term: 4, TTL: time.Minute})
	if l := h.Current(); l.Name != "gamma" || l.Term != 5 || l.Transitions != 3 {
		t.Fatalf("the view after gamma's term 5, then a late record of term 4: %+v, want gamma in term 5 with 3 transitions", l)
	}
	close(records)
	if err := <-done; err != nil {
		t.Fatalf("Follow returned %v", err)
	}
}
