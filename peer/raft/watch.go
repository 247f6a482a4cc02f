package raft

import (
	"context"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
)

// Watch returns a channel that receives key's record (see [Node.Get]) at
// once, then again whenever this node sees the raft leader or its own raft
// state change: a new leader, no leader (an election or a lost quorum), or
// this node becoming or ceasing to be leader. Deliveries coalesce (the
// latest record wins) and may repeat. The channel is closed when ctx is done
// or the node is closed. Watch does not block.
func (n *Node) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := n.checkKey(key); err != nil {
		return nil, err
	}
	if n.closed.Load() {
		return nil, tenure.ErrClosed
	}
	obs := make(chan hraft.Observation, 16)
	o := hraft.NewObserver(obs, false, func(o *hraft.Observation) bool {
		switch o.Data.(type) {
		case hraft.LeaderObservation, hraft.RaftState:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(o)
	out := make(chan tenure.Record)
	go func() {
		defer close(out)
		defer n.raft.DeregisterObserver(o)
		pending, last, sent := n.record(key), tenure.Record{}, false
		for {
			var send chan<- tenure.Record
			if !sent || pending != last {
				send = out
			}
			select {
			case <-ctx.Done():
				return
			case <-n.done:
				return
			case <-obs:
				// Observations can be dropped when the buffer is full, so
				// read the state rather than the observation.
				pending = n.record(key)
			case send <- pending:
				last, sent = pending, true
			}
		}
	}()
	return out, nil
}
