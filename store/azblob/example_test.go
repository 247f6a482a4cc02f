package azblob_test

import (
	"context"
	"errors"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
	_ "github.com/tenurehq/tenure/store/azblob" // registers azblob:// URLs
)

// MyLeaderCoordinatorTask is the work only one instance may do at a time.
// It runs until its context is cancelled: when leadership is lost or in
// doubt (the elector cancels it before the blob lease can expire), or at
// shutdown. Pass the lease's term with every write to the resource it
// coordinates, so a resource that has seen a higher term rejects the write
// of a leader that was paused and lost the lease without knowing.
func MyLeaderCoordinatorTask(ctx context.Context) error {
	lease, _ := tenure.LeaseFrom(ctx)
	log.Printf("coordinating %s as %s, term %d", lease.Key, lease.Identity, lease.Term)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Printf("stopped coordinating: %v", context.Cause(ctx))
			return nil
		case <-tick.C:
			tenure.Progress(ctx) // one round of coordination, fenced by lease.Term
		}
	}
}

// runCoordinator campaigns for the key "coordinator" in the store at
// storeURL and runs task whenever elected, until ctx is done. Unlike a bare
// blob-lease loop, the elector renews with deadlines tied to the lease,
// cancels the task before the lease can lapse, releases the lease when the
// task ends so another instance takes over at once, and campaigns again.
func runCoordinator(ctx context.Context, storeURL, identity string, task tenure.Task) error {
	store, err := tenure.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer store.Close()
	elector, err := tenure.New(tenure.Config{
		Store:    store,
		Key:      "coordinator",
		Identity: identity,
		TTL:      15 * time.Second, // an Azure blob lease lasts 15 to 60 s
	})
	if err != nil {
		return err
	}
	return elector.Run(ctx, task)
}

// Run MyLeaderCoordinatorTask on whichever instance holds the lease of the
// blob "coordinator" in container "leases", under the prefix "my-service".
// Credentials come from AZURE_STORAGE_CONNECTION_STRING, or from
// AZURE_STORAGE_ACCOUNT and AZURE_STORAGE_KEY.
func Example() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	host, _ := os.Hostname()
	err := runCoordinator(ctx, "azblob://leases/my-service", host, MyLeaderCoordinatorTask)
	if err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}
