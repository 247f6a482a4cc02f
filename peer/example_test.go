package peer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/bully"
	"github.com/tenurehq/tenure/peer/memnet"
	"github.com/tenurehq/tenure/peer/transport"
)

// Three Bully members on an in-memory network: the highest ID becomes
// coordinator, and its Store grants the lease with the epoch as term. In
// production each member opens its node from a peer:// URL with
// tenure.Open, on TCP.
func Example() {
	group, _ := transport.ParseMembers("1=,2=,3=")
	net := memnet.New(1)
	nodes := map[uint64]*peer.Node{}
	for _, id := range group.IDs() {
		n, err := peer.NewNode(peer.Config{
			ID: id, Group: group, Algorithm: "bully",
			Heartbeat: 10 * time.Millisecond, Timeout: 50 * time.Millisecond,
			Transport: net.Join(id), Epochs: &peer.MemEpoch{},
			Logger: slog.New(slog.DiscardHandler),
		}, bully.New())
		if err != nil {
			fmt.Println(err)
			return
		}
		defer n.Close()
		nodes[id] = n
	}
	ctx := context.Background()
	watch, _ := nodes[2].Watch(ctx, "job")
	for r := range watch {
		if r.Holder != "" {
			fmt.Println("member 2 follows coordinator", r.Holder)
			break
		}
	}
	// The coordinator grants once the others yielded to its epoch (about a
	// round trip); its watch delivers the record again then.
	own, _ := nodes[3].Watch(ctx, "job")
	var lease tenure.Lease
	var err error
	for range own {
		if lease, err = nodes[3].Acquire(ctx, "job", "3", time.Minute); !errors.Is(err, peer.ErrHandover) {
			break
		}
	}
	fmt.Println("member 3 acquires:", err == nil, "term = epoch:", lease.Term == nodes[3].Status().LeaderEpoch)
	_, err = nodes[2].Acquire(ctx, "job", "2", time.Minute)
	var held *tenure.HeldError
	fmt.Println("member 2 is refused:", errorsAs(err, &held), "holder", held.Record.Holder)
	// Output:
	// member 2 follows coordinator 3
	// member 3 acquires: true term = epoch: true
	// member 2 is refused: true holder 3
}
