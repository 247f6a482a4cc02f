package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// A call past its deadline fails with context.DeadlineExceeded even before
// the context's timer fired, as on a busy machine: Watch starts nothing,
// and an error pgx returned meanwhile is joined to DeadlineExceeded.
func TestPastDeadlineIsDeadlineExceeded(t *testing.T) {
	s, err := Open(context.Background(), "postgres://u:pw@127.0.0.1:1/db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := storetest.Lagging()
	if _, err := s.Watch(ctx, "job"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Watch past the deadline: %v, want context.DeadlineExceeded", err)
	}
	if err := s.fail(ctx, "get", errors.New("read tcp: i/o timeout")); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("fail past the deadline: %v, want context.DeadlineExceeded", err)
	}
}
