package ring_test

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure/peer/internal/simtest"
	"github.com/tenurehq/tenure/peer/wire"
)

// TestMessagesSingleInitiator checks Chang–Roberts exactly, on a fresh
// ring of n live members: an election started by member i alone takes
// d + n Election messages, where d = n − i is the ring distance from i to
// the highest member, then n Elected messages: 2n (i = n) to 3n−1 (i = 1).
// Every one is acknowledged once.
func TestMessagesSingleInitiator(t *testing.T) {
	for _, n := range []int{3, 5, 9, 17} {
		for i := 1; i <= n; i++ {
			t.Run(fmt.Sprintf("n=%d/i=%d", n, i), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := simtest.Start(t, simtest.Options{Algorithm: "ring", Size: n, Seed: 1, Configure: simtest.OnlyInitiator(uint64(i))})
					leader, _, err := c.AwaitAgreement(time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					st := c.Net.Stats()
					d := n - i
					el, ed := st.DeliveredOf(wire.Election), st.DeliveredOf(wire.Elected)
					if leader != uint64(n) || el != uint64(d+n) || ed != uint64(n) || st.Sent[wire.Ack] != el+ed {
						t.Fatalf("leader %d, %d election + %d elected messages, %d acks; theory: leader %d, %d + %d, as many acks",
							leader, el, ed, st.Sent[wire.Ack], n, d+n, n)
					}
					if total := el + ed; total < uint64(2*n) || total > uint64(3*n-1) {
						t.Fatalf("%d messages, outside [2n, 3n-1]", total)
					}
				})
			})
		}
	}
}

// TestMessagesAfterCrash: the coordinator (the highest ID) dies and member
// i alone notices. On the ring of m = n−1 live members the election takes
// d + m Election and m Elected messages delivered, d being the live-ring
// distance from i to member n−1, plus at most one failed attempt to reach
// the dead member before it is skipped.
func TestMessagesAfterCrash(t *testing.T) {
	for _, n := range simtest.BenchSizes {
		for _, i := range slices.Compact([]int{1, n / 2, n - 1}) {
			t.Run(fmt.Sprintf("n=%d/i=%d", n, i), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := simtest.Start(t, simtest.Options{Algorithm: "ring", Size: n, Seed: 1, Configure: simtest.OnlyInitiator(uint64(i))})
					_, leader, st, took := c.MustFailover(t, time.Hour)
					m, d := n-1, n-1-i
					el, ed := st.DeliveredOf(wire.Election), st.DeliveredOf(wire.Elected)
					failed := st.Failed[wire.Election] + st.Failed[wire.Elected]
					if leader != uint64(n-1) || el != uint64(d+m) || ed != uint64(m) || failed > 1 {
						t.Fatalf("leader %d, %d election + %d elected delivered, %d failed; theory: leader %d, %d + %d, at most 1 failed",
							leader, el, ed, failed, n-1, d+m, m)
					}
					t.Logf("n=%d i=%d: %d messages (+%d failed), elected after %s", n, i, el+ed, failed, took)
				})
			})
		}
	}
}

// BenchmarkElection: theory for one initiator on m live members is 2m to
// 3m−1; after a crash every member notices at about the same time, so
// several initiate, and Chang–Roberts swallowing keeps it near O(n log n).
func BenchmarkElection(b *testing.B) {
	simtest.BenchElection(b, "ring", func(n int) string {
		m := n - 1
		return fmt.Sprintf("one initiator %d..%d (2m..3m-1, m=n-1 live), all initiating worst m(m+1)/2+m = %d", 2*m, 3*m-1, m*(m+1)/2+m)
	})
}
