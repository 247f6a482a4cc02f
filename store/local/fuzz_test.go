//go:build linux

package local_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure/store/local"
)

// FuzzCorruptFiles writes arbitrary bytes over a key's record or its .terms
// record after two grants, with the process's memory of terms dropped so
// only the files speak, and checks that the store never panics, that Get
// and Acquire either fail with a one-line error (leaving the file as it
// was: nothing on disk is reset) or succeed, and that an Acquire that
// succeeds never hands out a term at or below the last one granted.
//
//	go test -fuzz=FuzzCorruptFiles ./store/local
func FuzzCorruptFiles(f *testing.F) {
	seedCorruptFiles(f)
	ctx := context.Background()
	f.Add([]byte{}, false)
	f.Add([]byte("tenure\x00L\x00\x01\x00\x00\x00\x02{}\x00\x00\x00\x00"), true)

	f.Fuzz(func(t *testing.T, data []byte, terms bool) {
		dir, _, last := withHistory(t, "k", 2)
		path := filepath.Join(dir, "k-k.state")
		if terms {
			path = filepath.Join(dir, ".terms", "k-k.term")
		}
		writeFile(t, path, data)
		local.ForgetSeen(dir)
		s2 := open(t, dir)
		unchanged := func(call string, err error) {
			t.Helper()
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("%s: error spans lines: %q", call, err)
			}
			if b, rerr := os.ReadFile(path); rerr != nil || !bytes.Equal(b, data) {
				t.Fatalf("%s failed (%v) but changed %s", call, err, path)
			}
		}
		if _, err := s2.Get(ctx, "k"); err != nil {
			unchanged("Get", err)
		}
		l, err := s2.Acquire(ctx, "k", "beta", time.Minute)
		if err != nil {
			unchanged("Acquire", err)
			return
		}
		if l.Term <= last.Term {
			t.Fatalf("Acquire over a damaged %s granted term %d, not above the last term %d", path, l.Term, last.Term)
		}
	})
}

// seedCorruptFiles adds FuzzCorruptFiles's seeds: the record and .terms
// record of a held grant (whole, truncated, with a lower term), then those
// of a grant made in a session, which name it.
func seedCorruptFiles(f *testing.F) {
	seedDir := f.TempDir()
	s, err := local.Open(seedDir)
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for range 2 {
		l, err := s.Acquire(ctx, "k", "alpha", time.Minute)
		if err != nil {
			f.Fatal(err)
		}
		if err := s.Release(ctx, l); err != nil {
			f.Fatal(err)
		}
	}
	held, err := s.Acquire(ctx, "k", "alpha", time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range []string{filepath.Join(seedDir, "k-k.state"), filepath.Join(seedDir, ".terms", "k-k.term")} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, which := range []bool{false, true} {
			f.Add(b, which)
			f.Add(b[:len(b)-1], which)
			f.Add(bytes.Replace(b, []byte(`"term":3`), []byte(`"term":1`), 1), which)
		}
	}
	s.Release(ctx, held)
	// And the records of a grant made in a session, which name it.
	ss, err := s.OpenSession(ctx, time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := ss.Acquire(ctx, "k", "alpha", "v"); err != nil {
		f.Fatal(err)
	}
	for _, p := range []string{filepath.Join(seedDir, "k-k.state"), filepath.Join(seedDir, ".terms", "k-k.term")} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
		f.Add(b, true)
	}
}
