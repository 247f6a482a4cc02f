package tenure_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// slotCounter is a memory store that counts the reads and renewals of
// candidate registration slots.
type slotCounter struct {
	*memory.Store
	reads, renewals atomic.Int64
}

func isSlot(key string) bool { return strings.Contains(key, tenure.CandidateSuffix) }

func (s *slotCounter) Get(ctx context.Context, key string) (tenure.Record, error) {
	if isSlot(key) {
		s.reads.Add(1)
	}
	return s.Store.Get(ctx, key)
}

func (s *slotCounter) Renew(ctx context.Context, l tenure.Lease) error {
	if isSlot(l.Key) {
		s.renewals.Add(1)
	}
	return s.Store.Renew(ctx, l)
}

// TestIdleLeaderDoesNotReadCandidateSlots: a leader without YieldAfter
// has no use for the list of the other candidates, so it does not read the
// slots while it leads, and it renews its own slot about once per TTL.
func TestIdleLeaderDoesNotReadCandidateSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &slotCounter{Store: memory.New(nil)}
		b := newBook()
		r := startCandidate(t, store, b, "a", 1)
		defer r.stop()
		<-b.began
		reads, renewals := store.reads.Load(), store.renewals.Load()
		time.Sleep(30 * ttl)
		if n := store.reads.Load() - reads; n != 0 {
			t.Errorf("the leader read candidate slots %d times in 30 TTLs; want none", n)
		}
		if n := store.renewals.Load() - renewals; n < 25 || n > 31 {
			t.Errorf("the leader renewed its slot %d times in 30 TTLs; want about once per TTL", n)
		}
	})
}

// renewalClock is a memory store that notes when (on the bubble's clock)
// each renewal of the key and of a registration slot was made.
type renewalClock struct {
	*memory.Store
	mu         sync.Mutex
	key, slots []time.Time
}

func (s *renewalClock) Renew(ctx context.Context, l tenure.Lease) error {
	s.mu.Lock()
	if isSlot(l.Key) {
		s.slots = append(s.slots, time.Now())
	} else {
		s.key = append(s.key, time.Now())
	}
	s.mu.Unlock()
	return s.Store.Renew(ctx, l)
}

// TestLeaderRenewsItsSlotWithItsKey: a leader renews its registration slot
// right after a renewal of its key, never at an instant of its own (each
// wake-up of an idle process costs about as much as a renewal), still
// about once per TTL; a candidate that does not lead renews it on its own
// schedule.
func TestLeaderRenewsItsSlotWithItsKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &renewalClock{Store: memory.New(nil)}
		b := newBook()
		a := startCandidate(t, store, b, "a", 1)
		defer a.stop()
		<-b.began
		from := time.Now()
		f := startCandidate(t, store, b, "f", 1) // a follower, for contrast
		defer f.stop()
		time.Sleep(30 * ttl)
		store.mu.Lock()
		defer store.mu.Unlock()
		keyAt := map[time.Time]bool{}
		for _, at := range store.key {
			keyAt[at] = true
		}
		var with, alone int
		for _, at := range store.slots {
			if at.After(from) && keyAt[at] {
				with++
			} else if at.After(from) {
				alone++
			}
		}
		// 30 TTLs: the leader's slot 22 to 30 times (once per TTL, up to one
		// renew interval late), all with its key; the follower's about 30
		// times, none of them.
		if with < 22 || with > 31 {
			t.Errorf("%d slot renewals came with a key renewal in 30 TTLs; want the leader's, about one per TTL", with)
		}
		if alone < 25 || alone > 31 {
			t.Errorf("%d slot renewals came alone in 30 TTLs; want the follower's, about one per TTL", alone)
		}
	})
}

// TestYieldingLeaderReadsCandidateSlots: a leader with YieldAfter reads
// the slots about once per TTL, to find whom to yield to.
func TestYieldingLeaderReadsCandidateSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &slotCounter{Store: memory.New(nil)}
		b := newBook()
		cfg := controlled(store, "a", 1)
		cfg.Control.YieldAfter = 5 * ttl
		r := start(newElector(t, cfg), b.task("a", nil))
		defer r.stop()
		<-b.began
		reads := store.reads.Load()
		time.Sleep(30 * ttl)
		if n := store.reads.Load() - reads; n < 25*tenure.CandidateSlots {
			t.Errorf("the yielding leader read candidate slots %d times in 30 TTLs; want about %d per TTL", n, tenure.CandidateSlots)
		}
	})
}

// TestFormerLeaderCountsCandidatesThatCameWhileItLed: a leader does not
// read the other candidates while it leads, so before it campaigns again
// it reads them: a candidate of higher priority that registered meanwhile
// gets its head start.
func TestFormerLeaderCountsCandidatesThatCameWhileItLed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		el := newElector(t, controlled(store, "low", 1))
		low := start(el, b.task("low", nil))
		defer low.stop()
		if first := <-b.began; first.id != "low" {
			t.Fatalf("%s leads, want low", first.id)
		}
		high := startCandidate(t, store, b, "high", 5)
		defer high.stop()
		time.Sleep(5*ttl + ttl/2) // high registers; low leads on, between two reads it skips
		if r := el.RankForTest(1); r != 0 {
			t.Fatalf("the leader ranks itself %d while it leads; want 0 (it reads no candidates)", r)
		}
		if err := el.BeforeAcquireForTest(context.Background()); err != nil {
			t.Fatal(err)
		}
		if r := el.RankForTest(1); r != 1 {
			t.Errorf("before campaigning again the former leader ranks itself %d; want 1, below high", r)
		}
	})
}

// TestForgedCandidatesAreNotListed: a registration slot written into the
// store from outside with a priority no elector can have (above
// MaxPriority, or negative) is not a candidate: it would rank above every
// real one in `tenure status --candidates` and as the best hand-over
// target. Nor is one registered at a time no clock shows (outside the
// years 1 to 9999): httpview's /candidates, which cannot encode such a
// time in JSON, answered 200 with an empty body, and `tenure status
// --candidates` showed a "since" that is not RFC 3339. A slot holding a
// real registration is listed as before.
func TestForgedCandidatesAreNotListed(t *testing.T) {
	ctx := context.Background()
	st := memory.New(tenure.SystemClock)
	defer st.Close()
	slot := func(i int) string { return fmt.Sprintf("job%s%02d", tenure.CandidateSuffix, i) }
	for i, c := range []tenure.Claim{
		{Identity: "ghost", TTL: time.Minute, Value: "candidate 5000 1700000000000"},
		{Identity: "shadow", TTL: time.Minute, Value: "candidate -1 1700000000000"},
		{Identity: "future", TTL: time.Minute, Value: "candidate 2 9223372036854775807"},
		{Identity: "past", TTL: time.Minute, Value: "candidate 2 -9223372036854775808"},
		{Identity: "year10000", TTL: time.Minute, Value: "candidate 2 253402300800000"},
		{Identity: "real", TTL: time.Minute, Value: "candidate 2 1700000000000"},
	} {
		if _, err := st.AcquireClaim(ctx, slot(i+3), c); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := tenure.Candidates(ctx, st, "job")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Identity != "real" || cs[0].Priority != 2 {
		t.Fatalf("Candidates = %+v; want only real, priority 2", cs)
	}
	if best, ok := tenure.BestCandidate(cs, ""); !ok || best.Identity != "real" {
		t.Fatalf("BestCandidate = %+v, %v; want real", best, ok)
	}
}

// forgedSlots is a store whose candidate slots read as the records in
// slots, as ones rewritten with the backend's own client (redis-cli HSET)
// would: they can hold identities no tenure Acquire accepts.
type forgedSlots struct {
	*memory.Store
	slots map[string]tenure.Record
}

func (f forgedSlots) Get(ctx context.Context, key string) (tenure.Record, error) {
	if r, ok := f.slots[key]; ok {
		return r, nil
	}
	return f.Store.Get(ctx, key)
}

// TestSlotsNoElectorCouldHoldAreNotListed: a registration slot rewritten
// from outside to name an identity no elector can have (4 MiB long, with
// terminal escapes, not UTF-8) is not a candidate either: listed, such an
// identity went whole into every GET /candidates of httpview (16 slots of
// some MB each) and could be named as the target of a hand-over.
func TestSlotsNoElectorCouldHoldAreNotListed(t *testing.T) {
	ctx := context.Background()
	st := memory.New(tenure.SystemClock)
	defer st.Close()
	slot := func(i int) string { return fmt.Sprintf("job%s%02d", tenure.CandidateSuffix, i) }
	f := forgedSlots{Store: st, slots: map[string]tenure.Record{}}
	for i, id := range []string{strings.Repeat("h", 4<<20), "evil\x1b]0;pwned\a", "bad\xff", "real"} {
		f.slots[slot(i)] = tenure.Record{Key: slot(i), Holder: id, Term: 1, TTL: time.Minute, Remaining: time.Minute,
			Value: "candidate 1000 1700000000000"}
	}
	cs, err := tenure.Candidates(ctx, f, "job")
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Identity != "real" {
		var ids []string
		for _, c := range cs {
			ids = append(ids, fmt.Sprintf("%.20q (%d bytes)", c.Identity, len(c.Identity)))
		}
		t.Fatalf("Candidates = %v; want only real", ids)
	}
}
