package peer

import "testing"

// TestSplitKey: the derived keys a peer store serves are told from keys
// as package tenure derives them, and nothing else is taken for one.
func TestSplitKey(t *testing.T) {
	for _, c := range []struct {
		key, base string
		kind      KeyKind
		slot      int
	}{
		{"job", "job", KindMain, 0},
		{"job~tenure-control", "job", KindControl, 0},
		{"job~tenure-candidate-07", "job", KindSlot, 7},
		{"job~tenure-candidate-15", "job", KindSlot, 15},
		{"a~b~tenure-candidate-00", "a~b", KindSlot, 0},
		{"job~tenure-prefer", "job~tenure-prefer", KindMain, 0}, // elected like any key
		{"job~tenure-candidate-16", "job~tenure-candidate-16", KindMain, 0},
		{"job~tenure-candidate-+1", "job~tenure-candidate-+1", KindMain, 0},
		{"job~tenure-candidate-7", "job~tenure-candidate-7", KindMain, 0},
		{"~tenure-control", "~tenure-control", KindMain, 0},
	} {
		base, kind, slot := SplitKey(c.key)
		if base != c.base || kind != c.kind || slot != c.slot {
			t.Errorf("SplitKey(%q) = %q, %d, %d; want %q, %d, %d", c.key, base, kind, slot, c.base, c.kind, c.slot)
		}
	}
}
