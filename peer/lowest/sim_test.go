package lowest_test

import (
	"testing"

	"github.com/tenurehq/tenure/peer/internal/simtest"
	_ "github.com/tenurehq/tenure/peer/lowest"
)

// TestSimulation is the fault simulation (see simtest.RunSimulations):
// once faults stop, the lowest live member coordinates.
func TestSimulation(t *testing.T) {
	simtest.RunSimulations(t, "lowest", "lowest", simtest.Lowest)
}

// TestPrioritySimulation is the fault simulation with random priorities
// (see simtest.RunPrioritySimulations): a member of priority 0 never
// coordinates nor runs a task, and once faults stop the highest priority
// (then the lowest ID) leads.
func TestPrioritySimulation(t *testing.T) {
	simtest.RunPrioritySimulations(t, "lowest", "lowest", simtest.Order{Preempts: true})
}
