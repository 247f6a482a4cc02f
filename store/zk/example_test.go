package zk_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/zk"
)

// Run a task only while this process leads, on a ZooKeeper ensemble. If the
// ZooKeeper connection drops, the task's context is cancelled at once.
func ExampleOpen() {
	ctx := context.Background()
	st, err := zk.Open(ctx, "zk://zk1:2181,zk2:2181,zk3:2181/tenure")
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
		<-ctx.Done()
		return nil
	})
	log.Print(err)
}
