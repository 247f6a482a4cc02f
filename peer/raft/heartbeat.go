package raft

import (
	hraft "github.com/hashicorp/raft"
)

// Heartbeats go through raft's main loop.
//
// hashicorp/raft lets a transport hand heartbeats (AppendEntries without
// entries) to a handler it installs with SetHeartbeatHandler, so that a
// follower whose main loop is busy writing its log still hears its leader
// in time. hraft.NetworkTransport does: it calls the handler, and through
// it raft's appendEntries, in the goroutine of the connection the
// heartbeat came on, beside the main loop. appendEntries is written for
// the main loop only: it compares the heartbeat's term with the current
// term, then sets the heartbeat's sender as the known leader. Meanwhile
// the main loop, taking a new term from a vote request, clears the known
// leader, writes the new term to stable storage (an fsync) and only then
// raises the term in memory. A heartbeat from the leader of the old term
// that is checked before the raise and sets its sender after the clear
// leaves the member naming the old leader in the new term until the new
// leader's first AppendEntries: what Get, Watch and the status protocol
// report, and so the observer. A `tenure step-down --to 2` in a CI run
// saw "3 leads, term 3" and then "2 already leads, term 3": member 3 had
// led term 2, 2 won term 3, and a third member named 3 in term 3.
// (hashicorp/raft issue #695 reports a log divergence from the same fast
// path racing the main loop.)
//
// So every transport raft gets is wrapped to install no handler: heartbeats
// reach raft through Consumer like any RPC, and the main loop handles them
// in order with the term changes, as hraft.InmemTransport, which installs
// none either, always had the in-process clusters do. The fast path's
// gain is small here: tenure's log holds a no-op entry per term and a
// value per grant, so a follower's main loop is seldom busy for long; a
// heartbeat waits behind what it is doing, usually one small write.

// serialHeartbeats returns t with SetHeartbeatHandler doing nothing, and
// every other method t's, including the optional hraft.WithClose and
// hraft.WithPreVote that raft looks for when t has them (and only then).
func serialHeartbeats(t hraft.Transport) hraft.Transport {
	switch t := t.(type) {
	case fullTransport:
		return serialFull{t}
	case closingTransport:
		return serialClosing{t}
	case preVoteTransport:
		return serialPreVote{t}
	default:
		return serialPlain{t}
	}
}

type (
	fullTransport interface {
		hraft.Transport
		hraft.WithClose
		hraft.WithPreVote
	}
	closingTransport interface {
		hraft.Transport
		hraft.WithClose
	}
	preVoteTransport interface {
		hraft.Transport
		hraft.WithPreVote
	}

	serialFull    struct{ fullTransport }
	serialClosing struct{ closingTransport }
	serialPreVote struct{ preVoteTransport }
	serialPlain   struct{ hraft.Transport }
)

func (serialFull) SetHeartbeatHandler(func(hraft.RPC))    {}
func (serialClosing) SetHeartbeatHandler(func(hraft.RPC)) {}
func (serialPreVote) SetHeartbeatHandler(func(hraft.RPC)) {}
func (serialPlain) SetHeartbeatHandler(func(hraft.RPC))   {}
