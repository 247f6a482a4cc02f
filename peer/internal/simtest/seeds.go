package simtest

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"testing/synctest"
)

// seedList is the seeds to run: TENURE_PEER_SEED alone, else
// TENURE_PEER_SEEDS of them (default k, half under the race detector,
// short with -short).
func seedList(k, short int) ([]uint64, error) {
	if s := os.Getenv("TENURE_PEER_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("TENURE_PEER_SEED=%q: %v", s, err)
		}
		return []uint64{v}, nil
	}
	switch {
	case testing.Short():
		k = short
	case raceEnabled:
		k /= 2
	}
	if s := os.Getenv("TENURE_PEER_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("TENURE_PEER_SEEDS=%q: %v", s, err)
		}
		k = v
	}
	seeds := make([]uint64, k)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds, nil
}

// eachSeed runs check for every seed, each in its own synctest bubble,
// and reports whether every seed passed. It stops at the first seed check
// fails, failing t with check's description of the seed and how to
// replay it: the command runs test of ./peer/pkg.
func eachSeed(t *testing.T, seeds []uint64, pkg, test string, check func(seed uint64) (desc string, err error)) bool {
	failed := false
	for _, seed := range seeds {
		synctest.Test(t, func(t *testing.T) {
			desc, err := check(seed)
			if err != nil {
				failed = true
				t.Fatalf("seed=%d %s: %v; replay: TENURE_PEER_SEED=%d go test ./peer/%s -run %s -v", seed, desc, err, seed, pkg, test)
			}
		})
		if failed {
			return false
		}
	}
	return true
}
