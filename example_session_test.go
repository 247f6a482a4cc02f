package tenure_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// One process leads many keys, one per partition: with a Session, the
// store sees one keep-alive per interval for all of them, not one renewal
// per key. Each key keeps its own term for fencing.
func ExampleSession() {
	store := memory.New(nil)
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: store, TTL: tenure.DefaultTTL})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var led []string
	var elected, wg sync.WaitGroup
	for _, partition := range []string{"orders-0", "orders-1", "orders-2"} {
		e, err := tenure.New(tenure.Config{
			Session:  sess, // Store and TTL come from the session
			Key:      partition,
			Identity: "worker-7",
			Logger:   slog.New(slog.DiscardHandler),
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		elected.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = e.Run(ctx, func(ctx context.Context) error {
				lease, _ := tenure.LeaseFrom(ctx)
				mu.Lock()
				led = append(led, fmt.Sprintf("%s term %d", lease.Key, lease.Term))
				mu.Unlock()
				elected.Done()
				<-ctx.Done() // consume the partition until leadership ends
				return nil
			})
		}()
	}
	elected.Wait()
	cancel()
	wg.Wait()
	sort.Strings(led)
	for _, l := range led {
		fmt.Println(l)
	}
	// Output:
	// orders-0 term 1
	// orders-1 term 1
	// orders-2 term 1
}
