package shard_test

import (
	"fmt"
	"testing"

	"github.com/tenurehq/tenure/shard"
)

// Rendezvous hashing moves only what it must: on a join, only keys the
// newcomer now owns; on a leave, only the leaver's keys. It also reports
// the balance and the moves for a range of K and n, as the README states.
func TestAssignMovesOnlyWhatItMust(t *testing.T) {
	for _, k := range []int{16, 64, 256, 1024} {
		keys := shard.Numbered(k)
		for n := 1; n <= 8; n++ {
			live := ids(n)
			before := shard.Assign(keys, live[:n-1])
			after := shard.Assign(keys, live)
			joined := live[n-1]
			moves := 0
			for _, key := range keys {
				if n > 1 && before[key] != after[key] {
					moves++
					if after[key] != joined {
						t.Errorf("K=%d n=%d: key %s moved from %s to %s, not to the newcomer %s", k, n, key, before[key], after[key], joined)
					}
				}
			}
			// A leave is the same change backwards: only the leaver's keys move.
			count := map[string]int{}
			for _, m := range live {
				count[m] = 0
			}
			for _, o := range after {
				count[o]++
			}
			lo, hi := k, 0
			for _, c := range count {
				lo, hi = min(lo, c), max(hi, c)
			}
			if k >= 256 && float64(hi) > 1.5*float64(k)/float64(n) {
				t.Errorf("K=%d n=%d: a member owns %d keys, more than 1.5 K/n", k, n, hi)
			}
			if testing.Verbose() && (n == 2 || n == 4 || n == 8) {
				t.Logf("K=%4d n=%d: min %d max %d (K/n %.1f), a join moves %d keys", k, n, lo, hi, float64(k)/float64(n), moves)
			}
		}
	}
}

func TestOwnerAndRank(t *testing.T) {
	live := ids(5)
	for _, key := range shard.Numbered(50) {
		owner := shard.Owner(key, live)
		if r := shard.Rank(key, owner, live); r != 0 {
			t.Fatalf("key %s: owner %s has rank %d", key, owner, r)
		}
		seen := map[int]bool{}
		for _, m := range live {
			seen[shard.Rank(key, m, live)] = true
		}
		if len(seen) != len(live) {
			t.Fatalf("key %s: ranks %v are not a permutation", key, seen)
		}
		// The runner-up owns the key once the owner leaves.
		var rest []string
		var second string
		for _, m := range live {
			if m != owner {
				rest = append(rest, m)
			}
			if shard.Rank(key, m, live) == 1 {
				second = m
			}
		}
		if got := shard.Owner(key, rest); got != second {
			t.Fatalf("key %s: without %s the owner is %s, not the runner-up %s", key, owner, got, second)
		}
	}
	if got := shard.Owner("x", nil); got != "" {
		t.Errorf("Owner with nobody live = %q, want \"\"", got)
	}
	if got := shard.Rank("x", "m9", live); got != -1 {
		t.Errorf("Rank of a member not live = %d, want -1", got)
	}
}

func ExampleOwner() {
	live := []string{"a", "b", "c"}
	fmt.Println(shard.Owner("orders-7", live) == shard.Owner("orders-7", []string{"c", "a", "b"}))
	// Output: true
}
