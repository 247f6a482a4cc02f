package lowest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/tenurehq/tenure/peer/internal/simtest"
	"github.com/tenurehq/tenure/peer/wire"
)

// TestMessagesAfterCrash: when the coordinator (member 1) dies, member 2
// takes over with one Coordinator message to each live member, n−2 in all;
// everything else is the heartbeats every member sends anyway.
func TestMessagesAfterCrash(t *testing.T) {
	simtest.EachSize(t, func(t *testing.T, n int) {
		c := simtest.Start(t, simtest.Options{Algorithm: "lowest", Size: n, Seed: 1})
		old, leader, st, took := c.MustFailover(t, time.Minute)
		if old != 1 || leader != 2 || st.Total(simtest.ElectionTypes...) != uint64(n-2) || st.Sent[wire.Coordinator] != uint64(n-2) {
			t.Fatalf("coordinator %d then %d after %v; want 1 then 2 after n-2 = %d coordinator messages", old, leader, st.Sent, n-2)
		}
		t.Logf("n=%d: %d messages, elected after %s", n, n-2, took)
	})
}

// BenchmarkElection: theory n−2 Coordinator messages per election, plus
// n(n−1) heartbeats per interval whether or not anything fails.
func BenchmarkElection(b *testing.B) {
	simtest.BenchElection(b, "lowest", func(n int) string { return fmt.Sprintf("%d (n-2)", n-2) })
}
