package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/tenurehq/tenure"
	_ "github.com/tenurehq/tenure/store/redis" // registers redis:// and rediss://
)

// Open a store by URL, as the tenure command does, and take a lease by
// hand. Hand l.Term to the resource you protect as a fencing token.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := tenure.Open(ctx, "redis://:secret@redis.internal:6379/0")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	l, err := st.Acquire(ctx, "nightly-report", "worker-1", 15*time.Second)
	var held *tenure.HeldError
	switch {
	case errors.As(err, &held):
		fmt.Printf("%s leads (term %d)\n", held.Record.Holder, held.Record.Term)
		return
	case err != nil:
		log.Fatal(err)
	}
	defer st.Release(ctx, l)
	fmt.Printf("leading with term %d\n", l.Term)
}
