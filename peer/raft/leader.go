package raft

import (
	hraft "github.com/hashicorp/raft"
)

// raftView is what [leaderNow] reads of a raft member: *hraft.Raft, or a
// scripted one in tests.
type raftView interface {
	CurrentTerm() uint64
	LeaderWithID() (hraft.ServerAddress, hraft.ServerID)
}

// leaderNow returns the raft leader member r knows ("" if none) and the
// term it leads, read consistently: what Get, Watch and the status
// protocol report. hashicorp/raft clears the known leader on every state
// change, a term raised by a vote request included, and sets it with the
// term of the leader's AppendEntries; so an ID read while the term stays
// the same is the leader of that term, provided heartbeats are handled by
// raft's main loop, in order with the term changes, as the node has them
// (heartbeat.go; on the transport's fast path a stale heartbeat could set
// the old leader after the clear). Read side by side with no such
// check, an election between the two reads paired the old leader with the
// new term: an observer then said the old leader had won the term that a
// leadership transfer's target was winning. leaderNow does not block.
func leaderNow(r raftView) (string, uint64) {
	for {
		term := r.CurrentTerm()
		_, id := r.LeaderWithID()
		if r.CurrentTerm() == term {
			return string(id), term
		}
		// The term moved between the reads: read again.
	}
}
