package tenure_test

import (
	"context"
	"testing"

	"github.com/tenurehq/tenure"
)

// LeaseFrom, TermFrom and Progress promise to report false, or do
// nothing, for a context that is not a leader context; a nil one panicked.
func TestNilContextIsNotALeaderContext(t *testing.T) {
	var nilCtx context.Context
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panicked: %v", r)
		}
	}()
	if _, ok := tenure.LeaseFrom(nilCtx); ok {
		t.Error("LeaseFrom(nil) reported a lease")
	}
	if _, ok := tenure.TermFrom(nilCtx); ok {
		t.Error("TermFrom(nil) reported a term")
	}
	tenure.Progress(nilCtx)
}
