package peer_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/sim"
	"github.com/tenurehq/tenure/peer/internal/simtest"
	"github.com/tenurehq/tenure/peer/memnet"
)

// TestStepDownSimulated: over memnet in virtual time, with delayed,
// duplicated and reordered messages (no loss: a member that misses the
// coordinator's Resign does not learn to hold back), every member running
// an elector with leadership control. The coordinator's own process asks
// it to step down to a member the algorithm would not pick: that member
// becomes coordinator and leads within the window, the old task ends
// first (no two tasks live at one instant, terms grow), and once the
// window is over the group still agrees on one coordinator.
func TestStepDownSimulated(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, alg := range []string{"lowest", "bully", "ring"} {
		for seed := uint64(1); seed <= 8; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", alg, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := simtest.Start(t, simtest.Options{Algorithm: alg, Size: 3, Seed: seed, Electors: true, Control: true})
					c.Net.SetFaults(memnet.Faults{Duplicate: 0.1, MinDelay: time.Millisecond, MaxDelay: 20 * time.Millisecond})
					leader, _, err := c.AwaitAgreement(20 * timeout)
					if err != nil {
						t.Fatal(err)
					}
					time.Sleep(2 * timeout) // the elector acquires
					synctest.Wait()
					to := uint64(1)
					if leader == 1 {
						to = 3
					}
					const window = 10 * timeout
					_, err = tenure.RequestStepDown(context.Background(), c.Nodes[leader], "sim",
						tenure.StepDownRequest{To: strconv.FormatUint(to, 10), Window: window})
					if err != nil {
						t.Fatal(err)
					}
					asked := time.Now()
					for {
						if l, _, ok := c.Agreed(); ok && l == to && slices.Equal(c.Leading(), []uint64{to}) {
							break
						}
						if time.Since(asked) > window {
							t.Fatalf("member %d does not lead within the window:\n%s\n%s", to, c.Describe(), c.Hist)
						}
						time.Sleep(timeout / 10)
					}
					time.Sleep(window) // the window ends; the algorithm may move on
					if _, _, err := c.AwaitAgreement(20 * timeout); err != nil {
						t.Fatal(err)
					}
					if v := sim.Overlaps(c.Hist); len(v) != 0 {
						t.Fatalf("%s\n%s", strings.Join(v, "\n"), c.Hist)
					}
				})
			})
		}
	}
}
