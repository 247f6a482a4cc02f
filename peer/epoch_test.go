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

// FuzzEpochFile loads any bytes as an epoch file: the term a member hands
// out next rests on it, and anything may be found on disk after a crash or
// a careless edit. Load never panics; it either refuses the file with
// ErrCorrupt, or returns an epoch whose saved form is exactly these bytes
// (the checksum covers all of them), so no damaged file is read as a
// smaller epoch.
func FuzzEpochFile(f *testing.F) {
	dir := f.TempDir()
	good, err := peer.OpenEpochFile(dir, 7)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range []uint64{0, 1, 1 << 40, ^uint64(0)} {
		if err := good.Save(e); err != nil {
			f.Fatal(err)
		}
		b, err := os.ReadFile(good.Path())
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
		f.Add(append(b, 0))
	}
	f.Add([]byte{})
	f.Add([]byte("not an epoch file at all"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		ef, err := peer.OpenEpochFile(dir, 7)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ef.Path(), b, 0o600); err != nil {
			t.Fatal(err)
		}
		e, err := ef.Load()
		if err != nil {
			if !errors.Is(err, peer.ErrCorrupt) {
				t.Fatalf("Load of %x = %v; want ErrCorrupt", b, err)
			}
			return
		}
		if err := ef.Save(e); err != nil {
			t.Fatal(err)
		}
		saved, err := os.ReadFile(ef.Path())
		if err != nil {
			t.Fatal(err)
		}
		if string(saved) != string(b) {
			t.Fatalf("Load of %x = epoch %d, whose saved form is %x", b, e, saved)
		}
	})
}
