package raft

import (
	"context"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/transport"
)

// A raft node knows nothing of the other members' liveness or priority: raft
// tells it only who leads. For the candidate slots its own elector reads
// while it leads (tenure.Control.YieldAfter hands over to a live member of
// a higher priority, through LeadershipTransferToServer), the leader asks
// each other member over the status protocol, as an observer does: a member
// that answers is registered, with the priority it reports.

// newPeerAsker returns the asker a node uses to ask the other members, over
// the status protocol of its TCP transport. The pool knows member i of
// cfg.Members as i+1 (raft member IDs need not be numbers).
func newPeerAsker(cfg Config) (*tlsAsker, error) {
	conf, err := clusterTLS(cfg.Secret)
	if err != nil {
		return nil, err
	}
	conf.NextProtos = []string{statusProto}
	psk, err := preauthKey(cfg.Secret)
	if err != nil {
		return nil, err
	}
	ms := make([]transport.Member, len(cfg.Members))
	for i, m := range cfg.Members {
		ms[i] = transport.Member{ID: uint64(i + 1), Addr: m.Addr}
	}
	g, err := transport.NewGroup(ms)
	if err != nil {
		return nil, invalidf("%v", err)
	}
	a := &tlsAsker{conf: conf, psk: psk}
	a.pool = transport.NewPool(g, a.dial, nil)
	return a, nil
}

// askSlot is, on the raft leader with a TCP transport, the record of
// candidate slot i of key: member i if it answers a status query within
// ctx and a heartbeat timeout, with its priority. ok is false where the
// node answers from what raft tells it instead (see derivedRecord): on a
// follower, for itself, with an injected transport.
func (n *Node) askSlot(ctx context.Context, key string, i int) (r tenure.Record, ok bool) {
	if n.peers == nil || i >= len(n.cfg.Members) || n.cfg.Members[i].ID == n.cfg.ID || n.raft.State() != hraft.Leader {
		return tenure.Record{}, false
	}
	r = tenure.Record{Key: key}
	qctx, cancel := context.WithTimeout(ctx, n.cfg.HeartbeatTimeout)
	defer cancel()
	s, err := transport.Query(qctx, n.peers.pool, uint64(i+1), n.peers.query)
	if err != nil {
		return r, true // not answering: not a candidate
	}
	prio := tenure.DefaultPriority
	if s.Priority != nil {
		prio = *s.Priority
	}
	r.Holder, r.Term, r.TTL, r.Remaining = n.cfg.Members[i].ID, 1, n.cfg.HeartbeatTimeout, n.cfg.HeartbeatTimeout
	r.Value = tenure.CandidateValue(prio, time.Time{})
	return r, true
}
