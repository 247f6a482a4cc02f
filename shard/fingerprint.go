package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// assignRule names the way [Assign] spreads keys; it is part of the
// fingerprint, so members that would spread the same lists differently
// (another tenure version) tell each other apart too.
const assignRule = "rendezvous with bounded loads;"

// fingerprint names the member list and the keys of c, whatever their
// order, and the assignment rule, as "members=N keys=K sha256=HEX": a
// member publishes it with its liveness grant, so that the others can
// tell when it was given another list or other keys, or spreads them by
// another rule (see membership.follow), and an operator can compare
// members with tenure status --key GROUP/members/ID.
func (c *Config) fingerprint() string {
	h := sha256.New()
	h.Write([]byte(assignRule))
	for _, list := range [][]string{c.Members, c.Keys} {
		for _, s := range slices.Sorted(slices.Values(list)) {
			fmt.Fprintf(h, "%d:%s,", len(s), s) // length-prefixed: no two lists encode alike
		}
		h.Write([]byte{';'})
	}
	return fmt.Sprintf("members=%d keys=%d sha256=%s", len(c.Members), len(c.Keys), hex.EncodeToString(h.Sum(nil)[:8]))
}
