package peer_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/internal/simtest"
)

// TestEpochNeverWraps: a member that learnt an epoch at the top of the
// range (a hostile member holding the secret sent 2^64-1, or a disk
// restored from elsewhere) must never issue a smaller one: max(known)+1
// wrapped to 0 and made the member coordinator under a small epoch, a
// fencing term that went backwards. Every algorithm must instead stay
// without a coordinator (and say so), the epochs it knows unchanged, and
// Acquire say ErrTermsExhausted, as a store's does, so electors stop.
func TestEpochNeverWraps(t *testing.T) {
	for _, alg := range []string{"bully", "ring", "lowest"} {
		for _, top := range []uint64{math.MaxUint64, math.MaxUint64 - 1} {
			t.Run(alg, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := simtest.New(simtest.Options{Algorithm: alg, Size: 3, Seed: 1})
					defer c.Close()
					for _, id := range c.Group.IDs() {
						c.Epochs[id].Save(top)
					}
					if err := c.StartAll(); err != nil {
						t.Fatal(err)
					}
					time.Sleep(5 * time.Second)
					for id, n := range c.Nodes {
						s := n.Status()
						for _, e := range s.Issued {
							if e < top {
								t.Errorf("member %d issued epoch %d after knowing %d", id, e, top)
							}
						}
						if s.Leader != 0 && s.LeaderEpoch < top {
							t.Errorf("member %d follows %d at epoch %d after knowing %d", id, s.Leader, s.LeaderEpoch, top)
						}
						if s.Epoch < top {
							t.Errorf("member %d: highest epoch went back from %d to %d", id, top, s.Epoch)
						}
						l, err := n.Acquire(context.Background(), "job", n.Identity(), time.Second)
						if err == nil && l.Term < top {
							t.Errorf("member %d granted term %d after knowing %d", id, l.Term, top)
						}
						if top == math.MaxUint64 && !errors.Is(err, tenure.ErrTermsExhausted) {
							t.Errorf("member %d Acquire = %v, want ErrTermsExhausted (no epoch is left)", id, err)
						}
					}
				})
			})
		}
	}
}
