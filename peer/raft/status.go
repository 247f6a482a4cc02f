package raft

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/transport"
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
//
// A step-down request is the byte '!' followed by one line of JSON (a
// stepDownRequest, at most maxStatusLine bytes); the answer is a
// statusReply line with "accepted" set if the member took it, else
// "refused" saying why. A member that predates it closes the connection.
// The connection's mutual TLS authenticates it (only holders of the
// secret get one) and protects it from replay.
const (
	statusProto     = "tenure-raft-status/1"
	statusRequest   = '?'
	stepDownRequest = '!'
	statusIdle      = 30 * time.Second
	// maxStatusLine bounds an answer the observer reads, and a step-down
	// request a member reads.
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
	// Priority is this member's own priority (nil from members that
	// predate it: the default). A leader that says 0 never grants.
	Priority *int `json:"priority,omitempty"`
	// HeartbeatTimeoutNS is this member's raft heartbeat timeout in
	// nanoseconds: how soon after losing touch with a leader it may vote
	// for another (0 from members that predate it). A leader refuses to
	// grant a TTL longer than any member's (see checkPeerTimeouts).
	HeartbeatTimeoutNS int64 `json:"heartbeat_timeout_ns,omitempty"`
	// Accepted and Refused answer a step-down request: taken, or why not.
	Accepted bool   `json:"accepted,omitempty"`
	Refused  string `json:"refused,omitempty"`
}

// stepDownReq is a step-down request on the status protocol: leader of
// Term, step down; hand over to member To ("" for any); the window in
// milliseconds.
type stepDownReq struct {
	Term     uint64 `json:"term"`
	To       string `json:"to,omitempty"`
	WindowMS int64  `json:"window_ms"`
}

// decodeStepDown parses and checks one request line: a JSON object with a
// term, a window from tenure.MinTTL to tenure.MaxTTL and a target that is
// "" or a member ID in decimal. It never panics.
func decodeStepDown(line []byte) (stepDownReq, error) {
	var r stepDownReq
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return stepDownReq{}, fmt.Errorf("raft: bad step-down request: %w", err)
	}
	if dec.More() {
		return stepDownReq{}, errors.New("raft: bad step-down request: trailing data")
	}
	w := time.Duration(r.WindowMS) * time.Millisecond
	switch {
	case r.Term == 0:
		return stepDownReq{}, errors.New("raft: bad step-down request: no term")
	case r.WindowMS <= 0 || r.WindowMS > int64(tenure.MaxTTL/time.Millisecond) || w < tenure.MinTTL:
		return stepDownReq{}, fmt.Errorf("raft: bad step-down request: window %dms out of range", r.WindowMS)
	}
	if r.To != "" {
		if _, err := transport.ParseID(r.To); err != nil {
			return stepDownReq{}, fmt.Errorf("raft: bad step-down request: target: %w", err)
		}
	}
	return r, nil
}

// setStatus makes the layer answer status connections with f's result;
// until then they are closed unanswered. f must not block.
func (l *tlsLayer) setStatus(f func() statusReply) { l.status.Store(&f) }

// setStepDown makes the layer pass step-down requests to f, which answers
// them; until then they are refused. f must not block.
func (l *tlsLayer) setStepDown(f func(stepDownReq) statusReply) { l.stepDown.Store(&f) }

// status is this member's statusReply: the leader and term as leaderNow
// reads them, the value published in that term as its FSM has applied it,
// and the member's priority. It does not block on the network.
func (n *Node) status() statusReply {
	id, term := leaderNow(n.raft)
	priority := n.cfg.priority()
	s := statusReply{Leader: id, Term: term, State: n.raft.State().String(), Priority: &priority,
		HeartbeatTimeoutNS: int64(n.cfg.HeartbeatTimeout)}
	if s.Leader != "" {
		s.Value = n.fsm.published(s.Term)
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
	r := bufio.NewReaderSize(c, maxStatusLine)
	enc := json.NewEncoder(c)
	enc.SetEscapeHTML(false) // a value of MaxValueLen bytes stays well under maxStatusLine
	for {
		c.SetReadDeadline(time.Now().Add(statusIdle))
		b, err := r.ReadByte()
		if err != nil {
			return
		}
		var answer statusReply
		switch b {
		case statusRequest:
			answer = (*f)()
		case stepDownRequest:
			c.SetReadDeadline(time.Now().Add(handshakeTimeout))
			line, err := r.ReadSlice('\n')
			if err != nil {
				return // too long, or cut short
			}
			answer = l.answerStepDown(line, *f)
		default:
			return
		}
		c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
		if err := enc.Encode(answer); err != nil {
			return
		}
	}
}

// answerStepDown decodes a step-down request line and passes it to the
// node, or refuses it.
func (l *tlsLayer) answerStepDown(line []byte, status func() statusReply) statusReply {
	req, err := decodeStepDown(bytes.TrimSpace(line))
	sd := l.stepDown.Load()
	switch {
	case err != nil:
	case sd == nil:
		err = errors.New("this member takes no step-down requests yet")
	default:
		return (*sd)(req)
	}
	s := status()
	s.Refused = err.Error()
	return s
}

// decodeStatus parses one answer line.
func decodeStatus(line []byte) (statusReply, error) {
	var s statusReply
	if err := json.Unmarshal(line, &s); err != nil {
		return statusReply{}, fmt.Errorf("raft: bad status answer: %w", err)
	}
	return s, nil
}
