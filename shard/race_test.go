//go:build race

package shard_test

// Under the race detector TestSeeds runs fewer schedules: each costs about
// twenty times as much, and the race runtime of Go 1.26 aborts now and
// then in long testing/synctest runs (a ThreadSanitizer CHECK failure,
// golang/go#78156), more often the longer the run.
const raceEnabled = true
