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
	watch := func(ctx context.Context) error {
		_, err := s.Watch(ctx, "job")
		return err
	}
	fail := func(ctx context.Context, err error) error { return s.fail(ctx, "get", err) }
	storetest.PastDeadline(t, watch, fail, errors.New("read tcp: i/o timeout"))
}
