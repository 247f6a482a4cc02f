package tenure_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// A nil task used to be called in the task's goroutine once elected: a
// nil-function panic that crashed the process while it held the key.
func TestNilTaskIsInvalid(t *testing.T) {
	mem := memory.New(nil)
	e := newElector(t, config(mem, "a"))
	for name, call := range map[string]func(context.Context, tenure.Task) error{"Run": e.Run, "Do": e.Do} {
		if err := call(context.Background(), nil); !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("%s(ctx, nil) = %v, want an error wrapping ErrInvalid", name, err)
		}
	}
	if rec, err := mem.Get(context.Background(), "job"); err != nil || rec.Holder != "" {
		t.Fatalf("key = %+v, %v: want never acquired", rec, err)
	}
}
