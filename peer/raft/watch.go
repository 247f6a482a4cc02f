package raft

import (
	"context"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
)

// Watch returns a channel that receives key's record (see [Node.Get]) at
// once, then again whenever this node sees the raft leader or its raft term
// change, or a value published: a new leader, no leader (an election or a lost quorum), or this
// node becoming or ceasing to be leader. It is [tenure.Follow] woken by
// raft's leader and state observations. The channel is closed when ctx is
// done or the node is closed. Watch does not block.
func (n *Node) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := n.checkKey(key); err != nil {
		return nil, err
	}
	if n.closed.Load() {
		return nil, tenure.ErrClosed
	}
	if base, kind, slot := peer.SplitKey(key); kind != peer.KindMain {
		return n.watchDerived(ctx, key, base, kind, slot)
	}
	ctx, cancel := context.WithCancel(ctx)
	obs, o := n.observeLeadership()
	wake := make(chan struct{}, 1)
	stopWake := n.fsm.wakeOn(wake) // a published value
	go func() {
		defer cancel()
		defer stopWake()
		defer n.raft.DeregisterObserver(o)
		for {
			select {
			case <-ctx.Done():
				return
			case <-n.done:
				return
			case <-obs:
				// Observations can be dropped when the buffer is full, so
				// they only prompt a read of the state.
				select {
				case wake <- struct{}{}:
				default:
				}
			}
		}
	}()
	get := func(ctx context.Context) (tenure.Record, error) { return n.Get(ctx, key) }
	return tenure.Follow{Get: get, Wake: wake, Announced: true}.Start(ctx), nil
}

// observeLeadership registers an observer of raft's leader and state
// changes, which change the records a watch delivers: it returns the
// channel the observations arrive on (buffered, never blocking raft:
// observations that find it full are dropped, a wake-up being all they
// are) and the observer, to deregister when done.
func (n *Node) observeLeadership() (chan hraft.Observation, *hraft.Observer) {
	obs := make(chan hraft.Observation, 16)
	o := hraft.NewObserver(obs, false, func(o *hraft.Observation) bool {
		switch o.Data.(type) {
		case hraft.LeaderObservation, hraft.RaftState:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(o)
	return obs, o
}
