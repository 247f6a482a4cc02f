package zk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure/storetest"
)

// TestFailHidesTheSecretAndKeepsTheChain checks that a request error whose
// message quotes the password loses the password but still matches what
// it wrapped, so callers can still tell a refusal from a timeout.
func TestFailHidesTheSecretAndKeepsTheChain(t *testing.T) {
	s := &Store{secret: "hunter2-secret", where: "127.0.0.1:2181"}
	cause := fmt.Errorf("auth with digest user:hunter2-secret: %w", zk.ErrAuthFailed)
	err := s.fail(context.Background(), "get", "k", cause)
	if strings.Contains(err.Error(), "hunter2-secret") {
		t.Errorf("the error quotes the password: %v", err)
	}
	if !errors.Is(err, zk.ErrAuthFailed) {
		t.Errorf("errors.Is(%v, zk.ErrAuthFailed) = false: the scrubbed error lost its chain", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = s.fail(ctx, "get", "k", cause)
	if strings.Contains(err.Error(), "hunter2-secret") || !errors.Is(err, context.Canceled) {
		t.Errorf("with ctx done: %v; want the password hidden and context.Canceled matched", err)
	}
}

// A request past its deadline fails with context.DeadlineExceeded even
// before the context's timer fired, as on a busy machine, whatever the
// client returned meanwhile (etcd's fail had the same slip).
func TestPastDeadlineIsDeadlineExceeded(t *testing.T) {
	s := &Store{where: "127.0.0.1:2181"}
	storetest.PastDeadline(t, s.usable, func(ctx context.Context, err error) error { return s.fail(ctx, "get", "job", err) }, zk.ErrConnectionClosed)
}
