//go:build linux

package local

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A record written over an existing one replaces it at once and leaves no
// temporary file; a directory put under the record's name after it was
// read (where rename would refuse) makes the write fail and stays put.
func TestReplaceSwapsAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	d, err := openDir(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.f.Close()
	for term := uint64(1); term <= 3; term++ {
		if err := writeState(d, d, "k.state", state{Key: "k", Term: term}, swapped); err != nil {
			t.Fatalf("write %d: %v", term, err)
		}
		d.recs.forget("k.state")
		st, ok, err := readState(d, "k.state")
		if err != nil || !ok || st.Term != term {
			t.Fatalf("after write %d read term %d, %v, %v", term, st.Term, ok, err)
		}
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 1 {
		t.Errorf("files left: %q, want only k.state", names)
	}
	if err := os.Remove(filepath.Join(dir, "k.state")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "k.state", "inside"), 0o700); err != nil {
		t.Fatal(err)
	}
	err = writeState(d, d, "k.state", state{Key: "k", Term: 4}, swapped)
	if !errors.Is(err, unix.EISDIR) {
		t.Errorf("write over a directory: %v, want EISDIR", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "k.state", "inside")); err != nil || !fi.IsDir() {
		t.Errorf("the directory moved: %v", err)
	}
	if names, _ := filepath.Glob(filepath.Join(dir, "*")); len(names) != 1 {
		t.Errorf("files left: %q, want only the directory", names)
	}
}
