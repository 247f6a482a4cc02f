package shard_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tenurehq/tenure/shard"
)

// Assign gives each live member ⌊K/n⌋ or ⌈K/n⌉ keys, and the same owners
// whatever the order of the keys and of the live members.
func TestAssignIsBalanced(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []int{1, 2, 3, 7, 16, 64, 256, 1024} {
		keys := shard.Numbered(k)
		for n := 1; n <= 9; n++ {
			live := ids(n)
			got := shard.Assign(keys, live)
			count := map[string]int{}
			for _, key := range keys {
				o := got[key]
				if !slices.Contains(live, o) {
					t.Fatalf("K=%d n=%d: key %s owned by %q, not a live member", k, n, key, o)
				}
				count[o]++
			}
			for _, m := range live {
				if c := count[m]; c != k/n && c != (k+n-1)/n {
					t.Errorf("K=%d n=%d: %s owns %d keys, not %d or %d", k, n, m, c, k/n, (k+n-1)/n)
				}
			}
			shKeys, shLive := slices.Clone(keys), slices.Clone(live)
			rng.Shuffle(len(shKeys), func(i, j int) { shKeys[i], shKeys[j] = shKeys[j], shKeys[i] })
			rng.Shuffle(len(shLive), func(i, j int) { shLive[i], shLive[j] = shLive[j], shLive[i] })
			for key, o := range shard.Assign(append(shKeys, shKeys[0]), shLive) {
				if got[key] != o {
					t.Fatalf("K=%d n=%d: key %s owned by %s, by %s with the lists shuffled", k, n, key, got[key], o)
				}
			}
		}
	}
}

// A join moves about K/(n+1) keys to the newcomer and a leave the
// leaver's keys, plus the few the bounds move between the others: never
// more than 1.5 times what plain rendezvous hashing moves, plus 2. It
// logs the figures the README states.
func TestAssignMovesLittle(t *testing.T) {
	for _, k := range []int{16, 64, 256, 1024} {
		keys := shard.Numbered(k)
		for n := 2; n <= 8; n++ {
			live := ids(n)
			before, after := shard.Assign(keys, live[:n-1]), shard.Assign(keys, live)
			joined := live[n-1]
			moves, toNewcomer := 0, 0
			for _, key := range keys {
				if before[key] != after[key] {
					moves++
					if after[key] == joined {
						toNewcomer++
					}
				}
			}
			if toNewcomer != k/n && toNewcomer != (k+n-1)/n {
				t.Errorf("K=%d n=%d: the newcomer got %d keys", k, n, toNewcomer)
			}
			// A leave is the same change backwards.
			if limit := 1.5*float64(k)/float64(n) + 2; float64(moves) > limit {
				t.Errorf("K=%d n=%d: a join moved %d keys, more than %.0f", k, n, moves, limit)
			}
			if testing.Verbose() && (n == 2 || n == 4 || n == 8) {
				t.Logf("K=%4d n=%d: a join (or a leave) moves %d keys, %d to (from) the newcomer (K/n %.1f)", k, n, moves, toNewcomer, float64(k)/float64(n))
			}
		}
	}
}

func TestOwnerAndRank(t *testing.T) {
	live := ids(5)
	keys := shard.Numbered(50)
	owners := shard.Assign(keys, live)
	for _, key := range keys {
		owner := shard.Owner(key, keys, live)
		if owner != owners[key] {
			t.Fatalf("key %s: Owner says %s, Assign %s", key, owner, owners[key])
		}
		if r := shard.Rank(key, owner, keys, live); r != 0 {
			t.Fatalf("key %s: owner %s has rank %d", key, owner, r)
		}
		seen := map[int]bool{}
		for _, m := range live {
			seen[shard.Rank(key, m, keys, live)] = true
		}
		for r := range len(live) {
			if !seen[r] {
				t.Fatalf("key %s: ranks %v are not 0..%d", key, seen, len(live)-1)
			}
		}
	}
	if got := shard.Owner("x", []string{"x"}, nil); got != "" {
		t.Errorf("Owner with nobody live = %q, want \"\"", got)
	}
	if got := shard.Owner("y", keys, live); got != "" {
		t.Errorf("Owner of a key not among keys = %q, want \"\"", got)
	}
	if got := shard.Rank("0", "m9", keys, live); got != -1 {
		t.Errorf("Rank of a member not live = %d, want -1", got)
	}
}

func ExampleAssign() {
	keys := shard.Numbered(8)
	owners := shard.Assign(keys, []string{"a", "b", "c"})
	count := map[string]int{}
	for _, k := range keys {
		count[owners[k]]++
	}
	fmt.Println(count["a"]+count["b"]+count["c"], max(count["a"], count["b"], count["c"]))
	// Output: 8 3
}
