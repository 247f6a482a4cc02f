package tenure_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"testing/synctest"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// An Observer that cannot work (no Store, a key no store accepts) used to
// panic (Current, and Changes in its goroutine: a crash) or, for a bad key,
// poll and log a warning forever on a channel that never delivered.
func TestObserverMisuse(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	for name, o := range map[string]*tenure.Observer{
		"nil store": {Key: "job", Logger: quiet},
		"empty key": {Store: memory.New(nil), Logger: quiet},
		"bad key":   {Store: memory.New(nil), Key: "a\nb", Logger: quiet},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				if _, err := o.Current(context.Background()); !errors.Is(err, tenure.ErrInvalid) {
					t.Errorf("Current = %v, want an error wrapping ErrInvalid", err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ch := o.Changes(ctx)
				synctest.Wait()
				select {
				case r, ok := <-ch:
					if ok {
						t.Fatalf("Changes delivered %+v, want the channel closed at once", r)
					}
				default:
					t.Fatal("Changes' channel still open, want it closed at once")
				}
			})
		})
	}
}
