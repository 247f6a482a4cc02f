package shard_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/memory"
)

// Two members of group "reports" share six keys. The first leads all of
// them; when the second joins, the keys it owns move to it: the first
// member's task for each such key stops, the lease is released, and the
// second member's task starts with the next term.
func Example() {
	store := memory.New(nil) // one process; across hosts: store/etcd, store/postgres, ...
	members := []string{"alpha", "beta"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var mu sync.Mutex
	var log []string
	task := func(id string) shard.Task {
		return func(ctx context.Context, key string) error {
			lease, _ := tenure.LeaseFrom(ctx) // lease.Term fences this key's writes
			mu.Lock()
			log = append(log, fmt.Sprintf("%s leads %s (term %d)", id, key, lease.Term))
			mu.Unlock()
			<-ctx.Done() // work until the key moves or Run ends
			return nil
		}
	}
	var wg sync.WaitGroup
	start := func(id string) *shard.Sharder {
		s, err := shard.New(shard.Config{
			Store: store, Group: "reports", Identity: id, Members: members,
			Keys: shard.Numbered(6), TTL: time.Second, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			panic(err)
		}
		wg.Go(func() { _ = s.Run(ctx, task(id)) })
		return s
	}
	settle := func(ss ...*shard.Sharder) {
		for {
			done := true
			for _, s := range ss {
				st := s.Status()
				done = done && len(st.Live) == len(ss) && slices.Equal(st.Leading, st.Owns)
			}
			if done {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	flush := func() {
		mu.Lock()
		slices.Sort(log)
		for _, l := range log {
			fmt.Println(l)
		}
		log = nil
		mu.Unlock()
	}

	alpha := start("alpha")
	settle(alpha)
	flush()
	fmt.Println("beta joins")
	beta := start("beta")
	settle(alpha, beta)
	flush()
	fmt.Println("alpha:", alpha.Leading(), "beta:", beta.Leading())
	cancel()
	wg.Wait()
	// Output:
	// alpha leads 0 (term 1)
	// alpha leads 1 (term 1)
	// alpha leads 2 (term 1)
	// alpha leads 3 (term 1)
	// alpha leads 4 (term 1)
	// alpha leads 5 (term 1)
	// beta joins
	// beta leads 1 (term 2)
	// beta leads 2 (term 2)
	// beta leads 5 (term 2)
	// alpha: [0 3 4] beta: [1 2 5]
}
