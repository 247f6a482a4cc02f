package demoworker_test

import (
	"fmt"

	"github.com/tenurehq/tenure/cmd/tenure/internal/demoworker"
)

// Check reads what workers wrote and says whether two ever ran at once.
func ExampleCheck() {
	var evs []demoworker.Event
	for _, line := range []string{
		"start node-1 1 1000 41 ok",
		"stop node-1 1 2000 41",
		"start node-2 2 2500 42 ok", // node-2 killed: no stop line
		"start node-3 3 4000 43 ok",
	} {
		ev, err := demoworker.Parse(line)
		if err != nil {
			panic(err)
		}
		evs = append(evs, ev)
	}
	h := demoworker.Check(evs)
	fmt.Printf("%d terms, %d overlaps, terms growing: %v\n", h.Starts, h.Overlaps, h.TermsGrow)
	// Output: 3 terms, 0 overlaps, terms growing: true
}
