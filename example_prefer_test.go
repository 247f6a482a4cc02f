package tenure_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// An operator prefers node-2 as the holder of "nightly" during a
// maintenance window: candidates with Config.Control hand the key over to
// it once it has been registered for a minute. The preference lasts as
// long as Prefer runs.
func ExamplePrefer() {
	store := memory.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- tenure.Prefer(ctx, store, "nightly", "operator", 10*time.Second,
			tenure.Preference{Holder: "node-2", Delay: time.Minute})
	}()
	changes, _ := store.Watch(context.Background(), tenure.PreferKey("nightly"))
	for r := range changes {
		if r.Held() {
			break // set
		}
	}
	p, ok, _ := tenure.ReadPreference(context.Background(), store, "nightly")
	fmt.Println(p.Holder, p.Delay, ok)

	cancel() // the maintenance is over
	<-done
	_, ok, _ = tenure.ReadPreference(context.Background(), store, "nightly")
	fmt.Println("still preferred:", ok)
	// Output:
	// node-2 1m0s true
	// still preferred: false
}
