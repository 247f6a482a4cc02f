package shard

import (
	"hash/fnv"
	"slices"
)

// Owner returns the member of live that owns key by rendezvous (highest
// random weight) hashing: each member scores every key with a hash of the
// pair, and the highest score wins. Every member that sees the same live
// set computes the same owner, with no communication. When a member joins,
// it takes over only the keys it now scores highest on (about K/(n+1) of
// them), each from the member that held it; when one leaves, only its keys
// move, each to the runner-up. Owner returns "" for an empty live set. It
// is a pure function, safe for concurrent use; followers can use it to
// route a key's work to its leader.
func Owner(key string, live []string) string {
	best, bestScore := "", uint64(0)
	for _, m := range live {
		s := score(key, m)
		if best == "" || s > bestScore || s == bestScore && m < best {
			best, bestScore = m, s
		}
	}
	return best
}

// Rank returns member's place in key's order of preference among live:
// 0 for the owner, 1 for the runner-up, and so on, or -1 if member is not
// in live. The fallback rule of [Sharder] waits longer the lower a member
// ranks, so that among members that all see a key unled, the best-placed
// one takes it.
func Rank(key, member string, live []string) int {
	if !slices.Contains(live, member) {
		return -1
	}
	mine := score(key, member)
	rank := 0
	for _, m := range live {
		if s := score(key, m); m != member && (s > mine || s == mine && m < member) {
			rank++
		}
	}
	return rank
}

// Assign returns the owner of every key among live, as [Owner] computes it.
func Assign(keys, live []string) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[k] = Owner(k, live)
	}
	return out
}

// score is the weight of (key, member): FNV-1a of both, separated so that
// ("ab","c") and ("a","bc") differ, then mixed with the splitmix64
// finaliser because FNV's high bits alone are poorly spread for short,
// similar strings ("0".."63", "m1".."m9").
func score(key, member string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
