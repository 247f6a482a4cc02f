package faultstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
)

// Put a store behind a fault plan, cut it off, and heal it.
func Example() {
	ctx := context.Background()
	faults := faultstore.New(faultstore.Plan{
		Seed: 42,
		// One reply in ten is lost after the store applied the call.
		Rates: faultstore.Rates{FailAfter: 0.1},
	})
	store := faultstore.Wrap(memory.New(nil), faults) // give this to tenure.Config.Store

	faults.Partition(faultstore.FailFast)
	_, err := store.Acquire(ctx, "job", "a", time.Minute)
	fmt.Println("partitioned:", errors.Is(err, faultstore.ErrInjected))

	faults.Heal() // no partition, no pause, no random faults
	l, err := store.Acquire(ctx, "job", "a", time.Minute)
	fmt.Println("healed:", l.Term, err)
	// Output:
	// partitioned: true
	// healed: 1 <nil>
}
