//go:build linux

package local_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
)

// Two processes on one host would each open the same directory; here two
// handles play their parts.
func Example() {
	dir, err := os.MkdirTemp("", "tenure-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	a, err := local.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := local.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	lease, err := a.Acquire(ctx, "nightly-report", "host-a", 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("a leads with term", lease.Term)

	_, err = b.Acquire(ctx, "nightly-report", "host-b", 15*time.Second)
	var held *tenure.HeldError
	if errors.As(err, &held) {
		fmt.Println("b sees the key held by", held.Record.Holder)
	}

	// Closing a (or a dying) ends its grant at once, without waiting for
	// the TTL.
	a.Close()
	lease, err = b.Acquire(ctx, "nightly-report", "host-b", 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b leads with term", lease.Term)
	// Output:
	// a leads with term 1
	// b sees the key held by host-a
	// b leads with term 2
}

// A store URL names the directory, as the tenure command line takes it.
func Example_url() {
	dir, err := os.MkdirTemp("", "tenure-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	st, err := tenure.Open(context.Background(), "file://"+dir)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	r, err := st.Get(context.Background(), "nightly-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", r.Held(), "term:", r.Term)
	// Output:
	// held: false term: 0
}

// A process holding many keys ties them to one session: one file, locked
// for the session's life and rewritten by each keep-alive, whatever the
// number of keys. [tenure.NewSession] does this for electors.
func ExampleStore_OpenSession() {
	dir, err := os.MkdirTemp("", "tenure-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	a, err := local.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Close()
	b, err := local.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	sess, err := a.OpenSession(ctx, 15*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"orders-0", "orders-1", "orders-2"} {
		lease, err := sess.Acquire(ctx, key, "host-a", "")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("a holds", lease.Key, "with term", lease.Term)
	}
	// Every ⅓ TTL or so: one write for all three keys.
	if _, err := sess.KeepAlive(ctx); err != nil {
		log.Fatal(err)
	}
	r, err := b.Get(ctx, "orders-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("b sees orders-1 held by", r.Holder)

	// Closing the session (or the death of its process) frees every key
	// at once.
	if err := sess.Close(ctx); err != nil {
		log.Fatal(err)
	}
	r, err = b.Get(ctx, "orders-1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Close, orders-1 held:", r.Held())
	// Output:
	// a holds orders-0 with term 1
	// a holds orders-1 with term 1
	// a holds orders-2 with term 1
	// b sees orders-1 held by host-a
	// after Close, orders-1 held: false
}
