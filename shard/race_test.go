//go:build race

package shard_test

// Under the race detector the cluster simulations do not run: the race
// runtime of Go 1.26 aborts the whole test binary now and then in
// testing/synctest bubbles with this many goroutines (a ThreadSanitizer
// CHECK failure, golang/go#78156), which would fail every other test of
// the package with it. .ci/run runs them without -race instead; the code
// they drive is also run under -race by TestLocalStore and the unit tests.
const raceEnabled = true
