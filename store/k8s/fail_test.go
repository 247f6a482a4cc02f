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
	limiter := errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline")
	storetest.PastDeadline(t, s.usable, func(ctx context.Context, err error) error { return s.fail(ctx, "get", "job", err) }, limiter)
}
