package bully_test

import (
	"testing"

	_ "github.com/tenurehq/tenure/peer/bully"
	"github.com/tenurehq/tenure/peer/internal/simtest"
)

// TestSimulation is the fault simulation (see simtest.RunSimulations):
// once faults stop, the highest live member coordinates (any one under
// no-preempt).
func TestSimulation(t *testing.T) {
	simtest.RunSimulations(t, "bully", "bully", simtest.Highest)
}

// TestPrioritySimulation is the fault simulation with random priorities
// (see simtest.RunPrioritySimulations): a member of priority 0 never
// coordinates nor runs a task, and once faults stop the highest priority
// (then the highest ID) leads, unless no-preempt keeps a lower one (then
// a leader's YieldAfter, when set, hands over to it).
func TestPrioritySimulation(t *testing.T) {
	simtest.RunPrioritySimulations(t, "bully", "bully", simtest.Order{HighIDs: true, Preempts: true, NoPreempt: true})
}
