package raft_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/raft"
)

// Three members, each with an elector; whichever raft elects runs the task
// once. A real deployment gives each member its own process, Dir and the
// shared Secret instead of the in-memory transport and stores:
//
//	node, err := raft.New(raft.Config{
//		ID:      "a",
//		Members: []raft.Member{{"a", "10.0.0.1:7001"}, {"b", "10.0.0.2:7001"}, {"c", "10.0.0.3:7001"}},
//		Dir:     "/var/lib/tenure/raft",
//		Secret:  secret, // the same ≥16 bytes on every member
//	})
func Example() {
	const hb = 200 * time.Millisecond
	ids := []string{"a", "b", "c"}
	var members []raft.Member
	var trans []*hraft.InmemTransport
	for _, id := range ids {
		addr, tr := hraft.NewInmemTransport("")
		members = append(members, raft.Member{ID: id, Addr: string(addr)})
		trans = append(trans, tr)
	}
	for _, a := range trans {
		for _, b := range trans {
			a.Connect(b.LocalAddr(), b)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan uint64, len(ids))
	for i, id := range ids {
		store := hraft.NewInmemStore()
		node, err := raft.New(raft.Config{
			ID: id, Members: members, HeartbeatTimeout: hb, Logger: hclog.NewNullLogger(),
			Transport: trans[i], LogStore: store, StableStore: store, SnapshotStore: hraft.NewInmemSnapshotStore(),
		})
		if err != nil {
			log.Fatal(err)
		}
		defer node.Close()
		e, err := tenure.New(tenure.Config{
			Store: node, Key: "jobs", Identity: id,
			TTL:    hb, // at most the heartbeat timeout
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			log.Fatal(err)
		}
		go e.Do(ctx, func(lctx context.Context) error {
			lease, _ := tenure.LeaseFrom(lctx)
			ran <- lease.Term // fence writes with this
			return nil
		})
	}
	term := <-ran
	fmt.Println("the leader ran the task, fenced by raft term > 1:", term > 1)
	// Output: the leader ran the task, fenced by raft term > 1: true
}
