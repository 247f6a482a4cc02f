package peer_test

import (
	"context"
	"errors"
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

// TestStepDownToADownMemberFallsBack: a step-down naming a member that is
// down leaves the key without a leader for the window (every live member
// holds back), and once the window ends another member leads: a transfer
// to an absent member falls back by itself.
func TestStepDownToADownMemberFallsBack(t *testing.T) {
	const timeout = 500 * time.Millisecond
	for _, alg := range []string{"lowest", "bully", "ring"} {
		t.Run(alg, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := simtest.Start(t, simtest.Options{Algorithm: alg, Size: 3, Seed: 1, Electors: true, Control: true})
				leader, _, err := c.AwaitAgreement(20 * timeout)
				if err != nil {
					t.Fatal(err)
				}
				down := uint64(2) // never the leader a group of 3 settles on here
				if leader == down {
					t.Fatalf("%s settled on member %d", alg, down)
				}
				c.Crash(down)
				time.Sleep(4 * timeout) // the others notice; the leader's task runs
				synctest.Wait()
				if got := c.Leading(); !slices.Equal(got, []uint64{leader}) {
					t.Fatalf("leading before the request: %v, want %d\n%s", got, leader, c.Describe())
				}
				const window = 10 * timeout
				if _, err := tenure.RequestStepDown(context.Background(), c.Nodes[leader], "sim",
					tenure.StepDownRequest{To: strconv.FormatUint(down, 10), Window: window}); err != nil {
					t.Fatal(err)
				}
				asked := time.Now()
				for time.Since(asked) < window-timeout {
					if got := c.Leading(); len(got) != 0 && time.Since(asked) > timeout {
						t.Fatalf("%v leads %s into the window for the absent member %d\n%s", got, time.Since(asked), down, c.Hist)
					}
					time.Sleep(timeout / 10)
				}
				for len(c.Leading()) == 0 {
					if time.Since(asked) > window+20*timeout {
						t.Fatalf("nobody leads %s after the window\n%s", time.Since(asked)-window, c.Describe())
					}
					time.Sleep(timeout / 10)
				}
				if v := sim.Overlaps(c.Hist); len(v) != 0 {
					t.Fatalf("%s\n%s", strings.Join(v, "\n"), c.Hist)
				}
			})
		})
	}
}

// TestNodeStepDownRefusals: a member's own node takes a step-down only as
// the coordinator; elsewhere it says who is and where to ask, and a
// target outside the group is invalid.
func TestNodeStepDownRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := simtest.Start(t, simtest.Options{Algorithm: "bully", Size: 3, Seed: 1, Electors: true, Control: true})
		leader, _, err := c.AwaitAgreement(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		follower := c.Nodes[1]
		if leader == 1 {
			follower = c.Nodes[2]
		}
		_, err = tenure.RequestStepDown(context.Background(), follower, "sim", tenure.StepDownRequest{})
		if err == nil || !strings.Contains(err.Error(), "ask through an observer") {
			t.Fatalf("a follower's node took a step-down: %v", err)
		}
		_, err = tenure.RequestStepDown(context.Background(), c.Nodes[leader], "sim", tenure.StepDownRequest{To: "7"})
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Fatalf("a target outside the group: %v, want ErrInvalid", err)
		}
		if _, err := tenure.RequestStepDown(context.Background(), c.Nodes[leader], "sim", tenure.StepDownRequest{To: strconv.FormatUint(leader, 10)}); err == nil {
			t.Fatal("a step-down to the coordinator itself was taken")
		}
	})
}
