//go:build linux

package local_test

import (
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
		Restart: func(testing.TB) {},
	})
}
