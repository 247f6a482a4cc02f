package storetest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// LeadAll runs an elector for each of keys through sess, as identity,
// with a task that runs until its context ends, and returns once every
// key has led, with how long that took; it fails b when no further key
// leads within limit. A key that leads again (in a new session, say) counts
// once. stop ends the electors and waits for them to return; closing sess
// is left to the caller. It is the set-up of the benchmarks that measure
// what an idle session leading many keys costs.
func LeadAll(b testing.TB, sess *tenure.Session, identity string, keys []string, limit time.Duration) (elected time.Duration, stop func()) {
	b.Helper()
	quiet := slog.New(slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
	}
	led := make(chan struct{}, len(keys))
	start := time.Now()
	for _, key := range keys {
		e, err := tenure.New(tenure.Config{Session: sess, Key: key, Identity: identity, Logger: quiet})
		if err != nil {
			stop()
			b.Fatal(err)
		}
		var first sync.Once
		wg.Go(func() {
			_ = e.Run(ctx, func(ctx context.Context) error {
				first.Do(func() { led <- struct{}{} })
				<-ctx.Done()
				return nil
			})
		})
	}
	for i := range keys {
		select {
		case <-led:
		case <-time.After(limit):
			stop()
			b.Fatalf("only %d of %d keys led after %s", i, len(keys), time.Since(start))
		}
	}
	return time.Since(start), stop
}
