package token

import (
	"encoding/hex"
	"testing"
)

func TestHex(t *testing.T) {
	for _, n := range []int{0, 12, 16} {
		a, b := Hex(n), Hex(n)
		if len(a) != 2*n {
			t.Errorf("Hex(%d) = %q: want %d characters", n, a, 2*n)
		}
		if _, err := hex.DecodeString(a); err != nil {
			t.Errorf("Hex(%d) = %q: not hex: %v", n, a, err)
		}
		if n > 0 && a == b {
			t.Errorf("Hex(%d) returned %q twice", n, a)
		}
	}
}
