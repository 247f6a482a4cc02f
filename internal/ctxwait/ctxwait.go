// Package ctxwait holds the waits on a context that several packages of
// the module need: a sleep that a context cuts short, and a cancel that
// follows a done channel.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits d or until ctx is done, whichever comes first, and reports
// whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// CancelOnClose calls cancel when done is closed, unless ctx is done
// first. It does not block: a goroutine waits, and it ends with ctx, so
// cancel must cancel ctx (or a context ctx derives from) for the goroutine
// not to outlive its use.
func CancelOnClose(ctx context.Context, done <-chan struct{}, cancel context.CancelFunc) {
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
}
