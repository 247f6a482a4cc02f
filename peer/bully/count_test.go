package bully_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenurehq/tenure/peer/internal/simtest"
	"github.com/tenurehq/tenure/peer/wire"
)

// TestMessagesBestCase checks Garcia-Molina's best case exactly: when the
// coordinator (the highest ID) dies and the next highest notices first, the
// election takes n−2 messages (Coordinator to every lower member) and no
// Election or Answer.
func TestMessagesBestCase(t *testing.T) {
	simtest.EachSize(t, func(t *testing.T, n int) {
		initiator := uint64(n - 1)
		c := simtest.Start(t, simtest.Options{Algorithm: "bully", Size: n, Seed: 1, Configure: simtest.OnlyInitiator(initiator)})
		old, leader, st, took := c.MustFailover(t, time.Hour)
		if old != uint64(n) || leader != initiator {
			t.Fatalf("coordinator %d then %d; want %d then %d", old, leader, n, initiator)
		}
		if got := st.Total(simtest.ElectionTypes...); got != uint64(n-2) || st.Sent[wire.Coordinator] != uint64(n-2) {
			t.Fatalf("election took %d messages (%v); theory: n-2 = %d coordinator messages", got, st.Sent, n-2)
		}
		t.Logf("n=%d: %d messages, elected after %s", n, n-2, took)
	})
}

// TestMessagesWorstCase has the lowest member notice the crash: every
// member it asks runs an election too, O(n²) messages. The count depends
// on timing (an election that meets the new coordinator's epoch stops), so
// it is bounded, not fixed: member 1's n−2 Elections and their n−2
// Answers at least, and fewer than n² messages.
func TestMessagesWorstCase(t *testing.T) {
	simtest.EachSize(t, func(t *testing.T, n int) {
		c := simtest.Start(t, simtest.Options{Algorithm: "bully", Size: n, Seed: 1, Configure: simtest.OnlyInitiator(1)})
		_, leader, st, _ := c.MustFailover(t, time.Hour)
		got := st.Total(simtest.ElectionTypes...)
		low := uint64(n - 2)
		if leader != uint64(n-1) || st.Sent[wire.Answer] < low || got >= uint64(n*n) {
			t.Fatalf("leader %d after %d messages %v; want %d, at least %d answers, fewer than n²=%d messages", leader, got, st.Sent, n-1, low, n*n)
		}
		t.Logf("n=%d: %d messages %v", n, got, st.Sent)
	})
}

// BenchmarkElection: the theory is n−2 messages at best, O(n²) at worst;
// after a crash detected by every member at about the same time, all
// members run elections, which is close to the worst case.
func BenchmarkElection(b *testing.B) {
	simtest.BenchElection(b, "bully", func(n int) string {
		return fmt.Sprintf("best %d (n-2), worst O(n^2) ~ %d", n-2, (n-2)*(n-1)/2*2+n-2)
	})
}
