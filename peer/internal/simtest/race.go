//go:build race

package simtest

// raceEnabled: the race detector slows a seed about fivefold, so fewer
// seeds run by default (see RunSimulations).
const raceEnabled = true
