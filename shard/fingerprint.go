package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// fingerprint names the member list and the keys of c, whatever their
// order, as "members=N keys=K sha256=HEX": a member publishes it with its
// liveness grant, so that the others can tell when it was given another
// list or other keys (see membership.follow), and an operator can compare
// members with tenure status --key GROUP/members/ID.
func (c *Config) fingerprint() string {
	h := sha256.New()
	for _, list := range [][]string{c.Members, c.Keys} {
		for _, s := range slices.Sorted(slices.Values(list)) {
			fmt.Fprintf(h, "%d:%s,", len(s), s) // length-prefixed: no two lists encode alike
		}
		h.Write([]byte{';'})
	}
	return fmt.Sprintf("members=%d keys=%d sha256=%s", len(c.Members), len(c.Keys), hex.EncodeToString(h.Sum(nil)[:8]))
}
