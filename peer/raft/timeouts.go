package raft

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tenurehq/tenure/peer/transport"
)

// peerTimeouts are the heartbeat timeouts other members reported over the
// status protocol, by index in Config.Members.
type peerTimeouts struct {
	mu sync.Mutex
	hb map[int]time.Duration
}

func (p *peerTimeouts) set(i int, hb time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hb == nil {
		p.hb = map[int]time.Duration{}
	}
	p.hb[i] = hb
}

// get returns the timeouts known now.
func (p *peerTimeouts) get() map[int]time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int]time.Duration, len(p.hb))
	for i, hb := range p.hb {
		out[i] = hb
	}
	return out
}

// checkPeerTimeouts refuses a grant of ttl, with an error wrapping
// tenure.ErrInvalid, when a majority of the members other than this one
// reported (over the status protocol) a heartbeat timeout shorter than ttl
// (see overlapRisk). The no-overlap rule rests
// on the members that confirmed a renewal voting for nobody else for a
// heartbeat timeout of their own; a member started with a shorter timeout
// (timeout= differs between URLs) may help elect a new leader while this
// one's task still runs. Found with three `tenure run` members, one with
// timeout=3s: SIGSTOPped while leading, its task ran 0.5s past the start
// of the next leader's.
//
// It asks every other member again, in the background, and waits only for
// the members whose timeout it does not know yet, at most a quarter of
// this node's heartbeat timeout: once every member answered once, it adds
// no wait to a failover. Members that never answer, and members that
// predate the field, are not counted. With an injected transport it
// checks nothing.
func (n *Node) checkPeerTimeouts(ctx context.Context, ttl time.Duration) error {
	if n.peers == nil {
		return nil
	}
	known := n.peerHB.get()
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.HeartbeatTimeout/4)
	var wg sync.WaitGroup
	learned := make(chan int, len(n.cfg.Members))
	pending := 0
	for i, m := range n.cfg.Members {
		if m.ID == n.cfg.ID {
			continue
		}
		if _, ok := known[i]; !ok {
			pending++
		}
		wg.Go(func() {
			if s, err := transport.Query(qctx, n.peers.pool, uint64(i+1), n.peers.query); err == nil && s.HeartbeatTimeoutNS > 0 {
				n.peerHB.set(i, time.Duration(s.HeartbeatTimeoutNS))
			}
			learned <- i
		})
	}
	go func() {
		wg.Wait()
		cancel()
	}()
	for pending > 0 {
		select {
		case i := <-learned:
			if _, ok := known[i]; !ok {
				pending--
			}
		case <-qctx.Done():
			pending = 0
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return n.overlapRisk(ttl)
}

// overlapRisk is the refusal of checkPeerTimeouts: a new leader needs the
// votes of a majority, and a member votes only once its own heartbeat
// timeout passed without word from this leader, so a grant of ttl can
// outlive this node's leadership only if a majority of members other than
// this one report a shorter timeout than ttl. One such member among
// members of longer timeouts cannot elect anyone sooner.
func (n *Node) overlapRisk(ttl time.Duration) error {
	var short []string
	for i, hb := range n.peerHB.get() {
		if hb < ttl {
			short = append(short, fmt.Sprintf("%s (%s)", n.cfg.Members[i].ID, hb))
		}
	}
	if len(short) < len(n.cfg.Members)/2+1 {
		return nil
	}
	slices.Sort(short)
	return invalidf("ttl %s exceeds the heartbeat timeout of members %s, a majority that may elect another leader while this one's task runs; give every member the same timeout (this one's is %s)", ttl, strings.Join(short, ", "), n.cfg.HeartbeatTimeout)
}
