package tenure_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// An OnKeepAlive callback that blocks (against its doc) stalls the
// session's keep-alive goroutine, which is also the one that ends the
// session's terms at the renew deadline: the leaderships must still be
// cancelled by then, before another process can be granted their keys.
func TestBlockingOnKeepAliveStillEndsTermsByTheRenewDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		unblock := make(chan struct{})
		var once sync.Once
		quiet := slog.New(slog.DiscardHandler)
		sa, err := tenure.NewSession(tenure.SessionConfig{Store: mem, TTL: ttl, Logger: quiet,
			OnKeepAlive: func(k tenure.SessionKeepAlive) {
				if k.Err == nil {
					once.Do(func() { <-unblock })
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		sb, err := tenure.NewSession(tenure.SessionConfig{Store: mem, TTL: ttl, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		la, err := sa.Campaign(ctx, "job", "a", "")
		if err != nil {
			t.Fatal(err)
		}
		lb, err := sb.Campaign(ctx, "job", "b", "") // once a's session expired
		if err != nil {
			t.Fatal(err)
		}
		aDone := la.Context().Err() != nil
		cause := context.Cause(la.Context())
		close(unblock)
		lb.Resign(ctx)
		<-la.Done()
		la.Resign(ctx)
		if err := sa.Close(ctx); err != nil {
			t.Errorf("Close a: %v", err)
		}
		if err := sb.Close(ctx); err != nil {
			t.Errorf("Close b: %v", err)
		}
		if !aDone {
			t.Fatal("b was granted the key while a's leadership was not cancelled")
		}
		if !errors.Is(cause, tenure.ErrRenewDeadline) {
			t.Fatalf("a's leadership ended with cause %v, want ErrRenewDeadline", cause)
		}
	})
}
