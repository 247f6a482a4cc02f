//go:build race

package raft

// defaultSeeds is how many simulation seeds a plain `go test -race` runs:
// the race detector makes each about seven times slower.
const defaultSeeds = 300
