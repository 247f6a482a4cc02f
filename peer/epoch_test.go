package peer_test

import (
	"errors"
	"os"
	"testing"

	"github.com/tenurehq/tenure/peer"
)

func TestEpochFile(t *testing.T) {
	dir := t.TempDir()
	f, err := peer.OpenEpochFile(dir, 7)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := f.Load(); e != 0 || err != nil {
		t.Fatalf("fresh Load = %d, %v", e, err)
	}
	for _, e := range []uint64{1, 5, 1 << 40} {
		if err := f.Save(e); err != nil {
			t.Fatal(err)
		}
		g, _ := peer.OpenEpochFile(dir, 7) // as after a restart
		if got, err := g.Load(); got != e || err != nil {
			t.Fatalf("Load after Save(%d) = %d, %v", e, got, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("state dir holds %d files, want only the epoch file", len(entries))
	}
	good, _ := os.ReadFile(f.Path())
	for name, b := range map[string][]byte{
		"truncated": good[:len(good)-1],
		"empty":     {},
		"bit flip":  append(append([]byte{}, good[:12]...), append([]byte{good[12] ^ 4}, good[13:]...)...),
		"garbage":   []byte("not an epoch file at all"),
	} {
		if err := os.WriteFile(f.Path(), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Load(); !errors.Is(err, peer.ErrCorrupt) {
			t.Errorf("%s: Load = %v, want ErrCorrupt", name, err)
		}
	}
}
