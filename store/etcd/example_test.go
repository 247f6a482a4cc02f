package etcd_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/etcd"
)

// Run a task only while this process leads, on an etcd cluster. The term
// handed to the task is the etcd revision of the grant: pass it with every
// write to the resource the leader protects.
func ExampleOpen() {
	ctx := context.Background()
	st, err := etcd.Open(ctx, "etcd://127.0.0.1:2379,127.0.0.1:22379/tenure")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	e, err := tenure.New(tenure.Config{Store: st, Key: "nightly-report", Identity: "host-1", TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	err = e.Run(ctx, func(ctx context.Context) error {
		l, _ := tenure.LeaseFrom(ctx)
		fmt.Println("leading with term", l.Term)
		<-ctx.Done() // work until leadership is in doubt
		return nil
	})
	log.Print(err)
}
