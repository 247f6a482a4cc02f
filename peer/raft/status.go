package raft

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"time"

	hraft "github.com/hashicorp/raft"
)

// The status protocol lets an observer (a peer URL without id) ask a member
// whom it sees leading, without being a raft member.
//
// It shares the member's raft port and its mutual TLS: the observer proves
// it holds the secret with a certificate from the cluster authority, like
// a member, and asks for the TLS application protocol (ALPN) statusProto.
// A connection that negotiated statusProto is served here and never reaches
// raft; raft's own connections offer no application protocol. Then, on the
// encrypted connection, each request is one byte ('?') and each answer one
// line of JSON (a statusReply), until either side closes or the connection
// is idle for statusIdle. A member older than this protocol negotiates no
// protocol, which the observer detects before sending anything.
const (
	statusProto   = "tenure-raft-status/1"
	statusRequest = '?'
	statusIdle    = 30 * time.Second
	// maxStatusLine bounds an answer the observer reads.
	maxStatusLine = 4096
)

// statusReply is a member's answer. Fields are only ever added.
type statusReply struct {
	// Leader is the raft leader's ID as this member knows it, "" for none.
	Leader string `json:"leader"`
	// Term is this member's current raft term.
	Term uint64 `json:"term"`
	// State is this member's raft state (Follower, Candidate, Leader...).
	State string `json:"state"`
	// Value is the value the leader published in Term, once this member
	// applied it; omitted when none (and by members that predate it).
	Value string `json:"value,omitempty"`
}

// setStatus makes the layer answer status connections with f's result;
// until then they are closed unanswered. f must not block.
func (l *tlsLayer) setStatus(f func() statusReply) { l.status.Store(&f) }

// nodeStatus is a raft member's statusReply, with the value published in
// its current term as fsm has applied it; it does not block on the
// network.
func nodeStatus(r *hraft.Raft, fsm *valueFSM) statusReply {
	_, id := r.LeaderWithID()
	s := statusReply{Leader: string(id), Term: r.CurrentTerm(), State: r.State().String()}
	if s.Leader != "" {
		s.Value = fsm.published(s.Term)
	}
	return s
}

// serveStatus answers an observer's requests on c until it closes, stays
// idle for statusIdle, or the layer closes. It runs in the handshake
// goroutine (counted in l.wg).
func (l *tlsLayer) serveStatus(c *tls.Conn) {
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-l.done:
			c.Close()
		case <-stop:
		}
	}()
	defer c.Close()
	f := l.status.Load()
	if f == nil {
		return
	}
	r := bufio.NewReader(c)
	enc := json.NewEncoder(c)
	enc.SetEscapeHTML(false) // a value of MaxValueLen bytes stays well under maxStatusLine
	for {
		c.SetReadDeadline(time.Now().Add(statusIdle))
		b, err := r.ReadByte()
		if err != nil || b != statusRequest {
			return
		}
		c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		if err := enc.Encode((*f)()); err != nil {
			return
		}
	}
}

// decodeStatus parses one answer line.
func decodeStatus(line []byte) (statusReply, error) {
	var s statusReply
	if err := json.Unmarshal(line, &s); err != nil {
		return statusReply{}, fmt.Errorf("raft: bad status answer: %w", err)
	}
	return s, nil
}
