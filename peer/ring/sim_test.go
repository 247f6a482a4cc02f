package ring_test

import (
	"testing"

	"github.com/tenurehq/tenure/peer/internal/simtest"
	_ "github.com/tenurehq/tenure/peer/ring"
)

// TestSimulation runs hundreds of seeded fault scenarios over memnet in
// virtual time (see simtest.RunSimulations): crashes, recoveries,
// partitions, loss, duplication, delay and resignations, then checks that
// once faults stop all live members agree on one coordinator within the
// stated bound, that epochs never go back on any member, and that no epoch
// is ever issued twice (so two coordinators during a partition differ).
func TestSimulation(t *testing.T) {
	simtest.RunSimulations(t, "ring", "ring", simtest.AnyLeader)
}
