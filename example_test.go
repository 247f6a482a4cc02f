package tenure_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// Two candidates share a queue of jobs; whoever leads runs them. The leader
// works through two jobs and returns, as a replica about to be redeployed
// would: its lease is released at once and the other candidate, woken by
// the store's watch, takes over with the next term.
func Example() {
	// memory coordinates goroutines of one process; processes on one host
	// use store/local, across hosts store/etcd, store/postgres, ...
	store := memory.New(nil)

	jobs := make(chan string, 4)
	for _, j := range []string{"report-1", "report-2", "report-3", "report-4"} {
		jobs <- j
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	leader := func(name string) tenure.Task {
		return func(ctx context.Context) error {
			lease, _ := tenure.LeaseFrom(ctx)
			for range 2 {
				select {
				case job := <-jobs:
					// Send lease.Term with every write to the resource you
					// protect; it rejects terms older than one it has seen.
					fmt.Printf("%s (term %d) runs %s\n", name, lease.Term, job)
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			if len(jobs) == 0 {
				cancel() // all done: stop both candidates
			}
			return nil // hand over: the lease is released at once
		}
	}

	elected := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for _, name := range []string{"alpha", "beta"} {
		e, err := tenure.New(tenure.Config{
			Store:    store,
			Key:      "reports",
			Identity: name,
			Logger:   slog.New(slog.DiscardHandler), // quiet here; the default is slog.Default()
			OnEvent: func(ev tenure.Event) {
				if ev.Kind == tenure.EventElected {
					once.Do(func() { close(elected) })
				}
			},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Run campaigns, runs the task whenever elected and campaigns
			// again, until ctx is done.
			if err := e.Run(ctx, leader(name)); err != context.Canceled {
				fmt.Println(name, "stopped:", err)
			}
		}()
		<-elected // start beta once alpha leads, so the output is fixed
	}
	wg.Wait()
	// Output:
	// alpha (term 1) runs report-1
	// alpha (term 1) runs report-2
	// beta (term 2) runs report-3
	// beta (term 2) runs report-4
}
