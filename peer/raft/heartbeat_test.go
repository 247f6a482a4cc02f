package raft

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	hraft "github.com/hashicorp/raft"
)

// fastPathTransport is an in-memory transport that, like
// hraft.NetworkTransport, takes the heartbeat fast path: a heartbeat is
// handed to the handler raft installed with SetHeartbeatHandler, in the
// goroutine that received it, instead of going through Consumer to raft's
// main loop. hraft.InmemTransport installs no handler, so without this the
// in-memory clusters never run raft's heartbeats beside its main loop as
// the TCP transport does.
type fastPathTransport struct {
	*hraft.InmemTransport
	handler atomic.Pointer[func(hraft.RPC)]
}

func (t *fastPathTransport) SetHeartbeatHandler(cb func(hraft.RPC)) {
	if cb == nil {
		t.handler.Store(nil)
		return
	}
	t.handler.Store(&cb)
}

// heartbeat delivers a heartbeat of leader from (member fromID at fromAddr,
// term term) to this transport's member toID at toAddr, as a
// hraft.NetworkTransport connection would: to the installed handler in
// the caller's goroutine if there is one (it returns once the handler
// did), else through the member's Consumer, from a goroutine of its own
// (it returns at once; raft's main loop answers it when it gets to it).
func (t *fastPathTransport) heartbeat(from *hraft.InmemTransport, fromID, fromAddr, toID, toAddr string, term uint64) {
	req := &hraft.AppendEntriesRequest{
		RPCHeader: hraft.RPCHeader{ProtocolVersion: hraft.ProtocolVersionMax, ID: []byte(fromID), Addr: []byte(fromAddr)},
		Term:      term,
	}
	if h := t.handler.Load(); h != nil {
		(*h)(hraft.RPC{Command: req, RespChan: make(chan hraft.RPCResponse, 1)})
		return
	}
	go from.AppendEntries(hraft.ServerID(toID), hraft.ServerAddress(toAddr), req, new(hraft.AppendEntriesResponse))
}

// pausingStable is a stable store that calls hook, if set, before each
// SetUint64 (raft's main loop writes the current term, then the vote, that
// way), in the writer's goroutine.
type pausingStable struct {
	*hraft.InmemStore
	hook atomic.Pointer[func(key string, val uint64)]
}

func (s *pausingStable) SetUint64(key []byte, val uint64) error {
	if h := s.hook.Load(); h != nil {
		(*h)(string(key), val)
	}
	return s.InmemStore.SetUint64(key, val)
}

// TestStaleHeartbeatDoesNotNameALeaderOfTheNewTerm reproduces what a CI
// run of `tenure step-down --to 2` in the raft mode saw through the
// observer: "3 leads, term 3", then "2 already leads, term 3", two holders
// of one term. Leader L of term T hands raft leadership to member `to`;
// the third member v takes term T+1 from to's vote request. Raft's main
// loop clears v's known leader, then writes term T+1 to stable storage and
// only then raises the term in memory; a heartbeat of L's term T that the
// transport's fast path hands to raft in that moment passes raft's term
// check and sets L back as v's leader, which v then reported with term
// T+1 until to's first AppendEntries. The test holds v's main loop at the
// term write to make that moment, and at the vote write after the term is
// raised to read what v reports. v must not name L as the leader of T+1,
// the term `to` wins.
func TestStaleHeartbeatDoesNotNameALeaderOfTheNewTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		trans := make([]*fastPathTransport, n)
		stables := make([]*pausingStable, n)
		c := newConfiguredCluster(t, n, testHB, nil, func(i int, cfg *Config) {
			trans[i] = &fastPathTransport{InmemTransport: cfg.Transport.(*hraft.InmemTransport)}
			if stables[i] == nil { // durable across restarts, like the cluster's own
				stables[i] = &pausingStable{InmemStore: cfg.StableStore.(*hraft.InmemStore)}
			}
			cfg.Transport, cfg.StableStore = trans[i], stables[i]
		})
		li := awaitLeader(t, c, 20*testHB)
		v, to := (li+1)%n, (li+2)%n
		term := c.node(li).Raft().CurrentTerm()

		// Hold v's main loop at its write of term+1 (its known leader is
		// cleared by then), deliver L's heartbeat of term, let the write
		// finish, and hold it again at the vote, after the term is raised.
		atTerm, atVote := make(chan struct{}), make(chan struct{})
		release := make(chan struct{})
		var termOnce, voteOnce sync.Once
		hook := func(key string, val uint64) {
			switch {
			case key == "CurrentTerm" && val == term+1:
				termOnce.Do(func() { close(atTerm); <-release })
			case key == "LastVoteTerm" && val == term+1:
				voteOnce.Do(func() { close(atVote); <-release })
			}
		}
		stables[v].hook.Store(&hook)

		// to cannot reach L, so it wins term+1 only with v's vote: its
		// AppendEntries of term+1 cannot reach v before v voted (else v
		// would take the term from those and refuse the vote).
		c.trans[to].Disconnect(c.addrs[li])
		transfer := c.node(li).Raft().LeadershipTransferToServer(hraft.ServerID(c.ids[to]), c.addrs[to])
		select {
		case <-atTerm:
		case <-time.After(20 * testHB):
			t.Fatalf("member %d never took term %d from %d's vote request", v, term+1, to)
		}
		trans[v].heartbeat(c.trans[li], c.ids[li], string(c.addrs[li]), c.ids[v], string(c.addrs[v]), term)
		release <- struct{}{}
		select {
		case <-atVote:
		case <-time.After(20 * testHB):
			t.Fatalf("member %d never voted in term %d", v, term+1)
		}
		st := c.node(v).status()
		rec, err := c.node(v).Get(context.Background(), "k")
		release <- struct{}{}
		if err != nil {
			t.Fatal(err)
		}
		c.heal()
		if err := transfer.Error(); err != nil {
			t.Fatalf("leadership transfer to member %d: %v", to, err)
		}
		l := awaitLeader(t, c, 20*testHB)
		if l != to || c.node(to).Raft().CurrentTerm() != term+1 {
			t.Fatalf("member %d leads term %d after the transfer; want %d in term %d", l, c.node(l).Raft().CurrentTerm(), to, term+1)
		}
		if st.Term == term+1 && st.Leader != "" && st.Leader != c.ids[to] {
			t.Errorf("member %d's status says %s leads term %d, which %s won", v, st.Leader, st.Term, c.ids[to])
		}
		if rec.Term == term+1 && rec.Holder != "" && rec.Holder != c.ids[to] {
			t.Errorf("member %d's Get says %s holds the key in term %d, which %s won", v, rec.Holder, rec.Term, c.ids[to])
		}
		if st.Term != term+1 || rec.Term != term+1 {
			t.Errorf("member %d reported terms %d (status) and %d (Get) in its vote of term %d", v, st.Term, rec.Term, term+1)
		}
	})
}

// TestSerialHeartbeatsKeepsOptionalInterfaces: the wrapper installs no
// heartbeat handler, and raft still finds Close and RequestPreVote on a
// transport that has them (the TCP and in-memory ones), and not on one
// that lacks them.
func TestSerialHeartbeatsKeepsOptionalInterfaces(t *testing.T) {
	_, inmem := hraft.NewInmemTransport("")
	fp := &fastPathTransport{InmemTransport: inmem}
	w := serialHeartbeats(fp)
	w.SetHeartbeatHandler(func(hraft.RPC) {})
	if fp.handler.Load() != nil {
		t.Fatal("serialHeartbeats passed the heartbeat handler on to the transport")
	}
	nt, err := hraft.NewTCPTransport("127.0.0.1:0", nil, 1, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	plain := struct{ hraft.Transport }{inmem}
	for _, c := range []struct {
		name           string
		t              hraft.Transport
		close, preVote bool
	}{
		{"in-memory", fp, true, true},
		{"TCP", nt, true, true},
		{"plain", plain, false, false},
		{"closing", struct {
			hraft.Transport
			hraft.WithClose
		}{inmem, inmem}, true, false},
		{"pre-vote", struct {
			hraft.Transport
			hraft.WithPreVote
		}{inmem, inmem}, false, true},
	} {
		w := serialHeartbeats(c.t)
		_, closes := w.(hraft.WithClose)
		_, preVotes := w.(hraft.WithPreVote)
		if closes != c.close || preVotes != c.preVote {
			t.Errorf("%s: wrapped, WithClose %v, WithPreVote %v; want %v, %v", c.name, closes, preVotes, c.close, c.preVote)
		}
	}
}
