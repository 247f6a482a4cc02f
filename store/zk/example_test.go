package zk_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync"
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

// Lead many shards over one ZooKeeper session: one connection and one
// keep-alive per RenewInterval, however many keys this process leads.
func ExampleStore_OpenSession() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	st, err := zk.Open(ctx, "zk://zk1:2181,zk2:2181,zk3:2181/tenure")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: 10 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	var wg sync.WaitGroup
	for shard := range 1000 {
		e, err := tenure.New(tenure.Config{Session: sess, Key: fmt.Sprintf("shard-%d", shard), Identity: "host-1"})
		if err != nil {
			log.Fatal(err)
		}
		wg.Go(func() {
			_ = e.Run(ctx, func(ctx context.Context) error {
				<-ctx.Done() // serve the shard until leadership ends
				return nil
			})
		})
	}
	wg.Wait() // until interrupted
	if err := sess.Close(context.Background()); err != nil {
		log.Print(err)
	}
}
