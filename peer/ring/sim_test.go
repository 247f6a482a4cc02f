package ring_test

import (
	"testing"

	"github.com/tenurehq/tenure/peer/internal/simtest"
	_ "github.com/tenurehq/tenure/peer/ring"
)

// TestSimulation is the fault simulation (see simtest.RunSimulations):
// once faults stop, any one live member coordinates.
func TestSimulation(t *testing.T) {
	simtest.RunSimulations(t, "ring", "ring", simtest.AnyLeader)
}

// TestPrioritySimulation is the fault simulation with random priorities
// (see simtest.RunPrioritySimulations): a member of priority 0 never
// coordinates nor runs a task, and once faults stop a member of priority
// above 0 leads; the highest priority (then the highest ID) when the
// electors have a YieldAfter (the ring does not preempt).
func TestPrioritySimulation(t *testing.T) {
	simtest.RunPrioritySimulations(t, "ring", "ring", simtest.Order{HighIDs: true})
}
