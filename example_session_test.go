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

// Without a goroutine per key: Campaign returns the leadership of a key
// once this process holds it, and its context ends when leadership ends or
// becomes doubtful. Resign once the work for the key has stopped.
func ExampleSession_Campaign() {
	sess, err := tenure.NewSession(tenure.SessionConfig{
		Store:  memory.New(nil),
		TTL:    tenure.DefaultTTL,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close(context.Background())

	var held []*tenure.Leadership
	for _, shard := range []string{"shard-0", "shard-1", "shard-2"} {
		l, err := sess.Campaign(context.Background(), shard, "worker-7", "")
		if err != nil {
			fmt.Println(err)
			return
		}
		held = append(held, l)
	}
	for _, l := range held {
		// Work for the shard goes here, fenced by l.Lease().Term and
		// stopped when l.Done() is closed.
		fmt.Printf("%s term %d, leading: %v\n", l.Lease().Key, l.Lease().Term, l.Context().Err() == nil)
		l.Resign(context.Background())
	}
	// Output:
	// shard-0 term 1, leading: true
	// shard-1 term 1, leading: true
	// shard-2 term 1, leading: true
}
