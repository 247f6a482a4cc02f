//go:build !race

package raft

// defaultSeeds is how many simulation seeds a plain `go test` runs (about
// 20 ms each on one core).
const defaultSeeds = 2000
