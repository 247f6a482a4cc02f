package httpview_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/httpview"
	"github.com/tenurehq/tenure/store/memory"
)

// Run and Follow with a nil context panicked on ctx.Done(), in the
// goroutine a program runs them in: a crash.
func TestRunAndFollowRefuseANilContext(t *testing.T) {
	h, err := httpview.New(httpview.Options{Key: "job", Store: memory.New(nil)})
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	if err := h.Run(nilCtx); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("Run(nil) = %v, want an error wrapping ErrInvalid", err)
	}
	if err := h.Follow(nilCtx, make(chan tenure.Record)); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("Follow(nil, ch) = %v, want an error wrapping ErrInvalid", err)
	}
}
