package promtenure

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// Run with no store or a key no store accepts cannot follow anything: it
// used to crash (no store) or poll and log for as long as ctx lasted and
// then return ctx's error, as if it had been following the key.
func TestRunRefusesWhatCannotBeFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		var nilCtx context.Context
		for name, run := range map[string]func() error{
			"nil store": func() error { return New("job").Run(ctx, nil) },
			"empty key": func() error { return New("").Run(ctx, memory.New(nil)) },
			"nil ctx":   func() error { return New("job").Run(nilCtx, memory.New(nil)) },
		} {
			if err := run(); !errors.Is(err, tenure.ErrInvalid) {
				t.Errorf("%s: Run = %v, want an error wrapping ErrInvalid", name, err)
			}
		}
		if ctx.Err() != nil {
			t.Error("Run waited for ctx instead of refusing at once")
		}
	})
}
