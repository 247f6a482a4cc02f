package tenure_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// Every replica calls Do with the same task at start-up; the task runs on
// one replica at a time, each in a term of its own. Do does not remember
// that the work was done: the task checks, fenced by its term, and the
// replicas elected later find nothing to do.
func ExampleElector_Do() {
	store := memory.New(nil)
	var mu sync.Mutex // stands for the database the task migrates
	version := 1
	migrate := func(name string) tenure.Task {
		return func(ctx context.Context) error {
			lease, _ := tenure.LeaseFrom(ctx)
			mu.Lock()
			defer mu.Unlock()
			if version == 2 {
				fmt.Printf("%s (term %d): already migrated\n", name, lease.Term)
				return nil
			}
			version = 2 // a real task writes with lease.Term as its fencing token
			fmt.Printf("%s (term %d): migrated to version 2\n", name, lease.Term)
			return nil
		}
	}
	for _, name := range []string{"alpha", "beta"} {
		e, err := tenure.New(tenure.Config{Store: store, Key: "migrate", Identity: name,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			fmt.Println(err)
			return
		}
		// Do blocks until this replica was elected, ran the task and
		// released the key; here one after the other, for a fixed output.
		if err := e.Do(context.Background(), migrate(name)); err != nil {
			fmt.Println(name, "failed:", err)
		}
	}
	// Output:
	// alpha (term 1): migrated to version 2
	// beta (term 2): already migrated
}

// A follower routes requests to the leader: it follows the key with an
// Observer, which needs only to read the store, and learns the address the
// leader published with its grant (Config.Value).
func ExampleObserver() {
	store := memory.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	changes := (&tenure.Observer{Store: store, Key: "api"}).Changes(ctx)
	fmt.Printf("leader: %q\n", (<-changes).Holder) // nobody yet

	e, err := tenure.New(tenure.Config{Store: store, Key: "api", Identity: "alpha",
		Value: "10.0.0.7:8080", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	stepDown := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- e.Do(ctx, func(context.Context) error { <-stepDown; return nil })
	}()
	r := <-changes
	fmt.Printf("leader: %s at %s (term %d)\n", r.Holder, r.Value, r.Term)
	close(stepDown) // the task returns: Do releases the key
	r = <-changes
	fmt.Printf("leader: %q\n", r.Holder)
	fmt.Println("Do:", <-done)
	// Output:
	// leader: ""
	// leader: alpha at 10.0.0.7:8080 (term 1)
	// leader: ""
	// Do: <nil>
}
