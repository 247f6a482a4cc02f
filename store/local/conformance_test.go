//go:build linux

package local_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
	"github.com/tenurehq/tenure/storetest"
)

// open returns a new handle on dir, closed when the test ends.
func open(t testing.TB, dir string) *local.Store {
	t.Helper()
	s, err := local.Open(dir)
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	storetest.Run(t, storetest.Options{
		// Each handle is what another process would have: its own files,
		// locks and grants. Closing it ends its grants as a crash would.
		Open: func(t testing.TB) tenure.Store { return open(t, dir) },
		// Terms live in the files: closing every handle and opening a new
		// one is a restart of this store.
		Restart:  func(testing.TB) {},
		Tamper:   tamperIn(dir),
		Sessions: true,
	})
}

// tamperIn deletes files in the state directory dir with plain file
// operations, as an operator cleaning up would, and overwrites a record
// in place in tenure's own format, as a restored backup or another tool
// would (see also TestRecordOverwrittenFromOutside).
func tamperIn(dir string) *storetest.Tamper {
	remove := func(tb testing.TB, paths ...string) {
		tb.Helper()
		// The record first, as `rm k-KEY.*` sorts it after the others is
		// not guaranteed; the holder may react and remove its own files.
		slices.SortStableFunc(paths, func(a, b string) int {
			return boolInt(!strings.HasSuffix(a, ".state")) - boolInt(!strings.HasSuffix(b, ".state"))
		})
		for _, p := range paths {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				tb.Fatal(err)
			}
		}
	}
	keyFiles := func(tb testing.TB, key string) []string {
		tb.Helper()
		m, err := filepath.Glob(filepath.Join(dir, local.BaseName(key)+".*"))
		if err != nil || len(m) == 0 {
			tb.Fatalf("no files of key %q in %s (%v)", key, dir, err)
		}
		return m
	}
	return &storetest.Tamper{
		OverwriteGrant: func(tb testing.TB, key, identity string) {
			tb.Helper()
			if err := local.OverwriteRecord(dir, key, identity); err != nil {
				tb.Fatal(err)
			}
		},
		DeleteGrant: func(tb testing.TB, key string) { remove(tb, keyFiles(tb, key)...) },
		DeleteAll: func(tb testing.TB, key string) {
			remove(tb, append(keyFiles(tb, key), filepath.Join(dir, local.TermsDir, local.BaseName(key)+".term"))...)
		},
	}
}
