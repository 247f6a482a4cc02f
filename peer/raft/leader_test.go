package raft

import (
	"testing"

	hraft "github.com/hashicorp/raft"
)

// electedBetweenReads is a raft member whose election of a new leader
// completes right after its leader is read: the race that made an
// observer pair the old leader with the new term.
type electedBetweenReads struct {
	term   uint64
	leader hraft.ServerID
	next   func(*electedBetweenReads) // the election; nil once it happened
}

func (r *electedBetweenReads) CurrentTerm() uint64 { return r.term }

func (r *electedBetweenReads) LeaderWithID() (hraft.ServerAddress, hraft.ServerID) {
	id := r.leader
	if r.next != nil {
		r.next(r)
		r.next = nil
	}
	return "", id
}

// TestLeaderNowAcrossAnElection: a new term and leader arriving between
// the reads of the leader and of the term must not pair n1, the leader of
// term 2, with term 3, which n2 won.
func TestLeaderNowAcrossAnElection(t *testing.T) {
	r := &electedBetweenReads{term: 2, leader: "n1", next: func(r *electedBetweenReads) { r.term, r.leader = 3, "n2" }}
	if id, term := leaderNow(r); id != "n2" || term != 3 {
		t.Fatalf("leaderNow = %q, term %d; want n2, term 3", id, term)
	}
	r = &electedBetweenReads{term: 2, leader: "n1", next: func(r *electedBetweenReads) { r.term, r.leader = 3, "" }}
	if id, term := leaderNow(r); id != "" || term != 3 {
		t.Fatalf("leaderNow = %q, term %d during an election; want nobody, term 3", id, term)
	}
	r = &electedBetweenReads{term: 5, leader: "n0"}
	if id, term := leaderNow(r); id != "n0" || term != 5 {
		t.Fatalf("leaderNow = %q, term %d; want n0, term 5", id, term)
	}
}
