package k8s

import (
	"context"
	"errors"
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// A request past its deadline fails with context.DeadlineExceeded even
// before the context's timer fired, whatever client-go said (its rate
// limiter says only that its wait "would exceed context deadline"). CI
// once failed the conformance suite's "Get past its deadline" this way.
func TestPastDeadlineIsDeadlineExceeded(t *testing.T) {
	s := &Store{}
	ctx := storetest.Lagging()
	if err := s.usable(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("usable past the deadline: %v, want context.DeadlineExceeded", err)
	}
	limiter := errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
	if err := s.fail(ctx, "get", "job", limiter); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("fail past the deadline: %v, want context.DeadlineExceeded", err)
	}
}
