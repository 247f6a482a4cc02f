package tenure_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// The functions that take a store or reader as an argument panicked on a
// nil one (Candidates, ReadPreference, AwaitSuccessor, on a nil interface
// deep inside); Prefer refused bad arguments in the words of an elector's
// Config ("Config.TTL", "Config.Identity", "Config.Store"), fields its
// caller never saw.
func TestStoreArgumentErrorsNameTheArguments(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(nil)
	p := tenure.Preference{Holder: "b"}
	for name, c := range map[string]struct {
		call func() error
		want string
	}{
		"Candidates":       {func() error { _, err := tenure.Candidates(ctx, nil, "job"); return err }, "Candidates with a nil store"},
		"ReadPreference":   {func() error { _, _, err := tenure.ReadPreference(ctx, nil, "job"); return err }, "ReadPreference with a nil store"},
		"AwaitSuccessor":   {func() error { _, err := tenure.AwaitSuccessor(ctx, nil, "job", 0); return err }, "AwaitSuccessor with a nil store"},
		"RequestStepDown":  {func() error { _, err := tenure.RequestStepDown(ctx, nil, "job", tenure.StepDownRequest{}); return err }, "RequestStepDown with a nil store"},
		"Prefer nil store": {func() error { return tenure.Prefer(ctx, nil, "job", "op", time.Second, p) }, "Prefer with a nil store"},
		"Prefer issuer":    {func() error { return tenure.Prefer(ctx, mem, "job", "", time.Second, p) }, "Prefer's issuer is empty"},
		"Prefer ttl":       {func() error { return tenure.Prefer(ctx, mem, "job", "op", time.Millisecond, p) }, "Prefer's ttl (1ms) must be from"},
	} {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s panicked: %v", name, r)
				}
			}()
			err := c.call()
			if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "Config.") {
				t.Errorf("%s = %v, want an ErrInvalid saying %q, naming no Config field", name, err, c.want)
			}
		}()
	}
}
