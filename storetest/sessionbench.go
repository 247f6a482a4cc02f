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
	return LeadEach(b, tenure.Config{Session: sess, Identity: identity}, keys, limit)
}

// LeadEach is LeadAll for electors configured as base, each on one of keys
// (with a quiet logger if base has none): base with a Store and a TTL
// instead of a Session gives the electors that each renew their own key,
// which the session benchmarks compare with.
func LeadEach(b testing.TB, base tenure.Config, keys []string, limit time.Duration) (elected time.Duration, stop func()) {
	b.Helper()
	if base.Logger == nil {
		base.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	stop = func() {
		cancel()
		wg.Wait()
	}
	led := make(chan struct{}, len(keys))
	start := time.Now()
	for _, key := range keys {
		cfg := base
		cfg.Key = key
		e, err := tenure.New(cfg)
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
