// Package electortest runs electors in the background for the tests of the
// packages that watch one: httpview, promtenure and cmd/tenure.
package electortest

import (
	"context"
	"testing"

	"github.com/tenurehq/tenure"
)

// Run runs e.Run with task in a goroutine until the test ends: a cleanup
// cancels the context e.Run got and waits for e.Run to return. Its error is
// dropped. The context is returned, for what must run as long as e does.
// Run does not block.
func Run(t testing.TB, e *tenure.Elector, task tenure.Task) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.Run(ctx, task)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return ctx
}

// TaskUntil returns a task that leads until its context is cancelled or
// resign is closed, then returns nil. A nil resign never ends the task.
func TaskUntil(resign <-chan struct{}) tenure.Task {
	return func(ctx context.Context) error {
		select {
		case <-ctx.Done():
		case <-resign:
		}
		return nil
	}
}
