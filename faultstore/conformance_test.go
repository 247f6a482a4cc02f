package faultstore_test

import (
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
	"github.com/tenurehq/tenure/storetest"
)

// With no faults planned, the wrapper is invisible: it passes the
// conformance suite, watch included.
func TestConformanceWithoutFaults(t *testing.T) {
	t.Parallel()
	shared := memory.New(nil)
	f := faultstore.New(faultstore.Plan{Seed: 1})
	storetest.Run(t, storetest.Options{
		Sessions: true,
		Open:     func(testing.TB) tenure.Store { return faultstore.Wrap(shared.Handle(), f) },
	})
}
