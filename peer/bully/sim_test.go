package bully_test

import (
	"testing"

	_ "github.com/tenurehq/tenure/peer/bully"
	"github.com/tenurehq/tenure/peer/internal/simtest"
)

// TestSimulation runs thousands of seeded fault scenarios over memnet in
// virtual time (see simtest.RunSimulations), every member running a real
// tenure.Elector: crashes and recoveries (of any member, of the
// coordinator, of the member with precedence), partitions in half of the
// seeds, loss, duplication, delay and tasks that return (resignations).
// It checks that in a seed without partitions no two members' leader
// tasks are ever live at the same instant and terms grow, that once faults
// stop all live members agree on one coordinator within the stated bound,
// that epochs never go back on any member, and that no epoch is ever
// issued twice (so two coordinators during a partition differ).
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
