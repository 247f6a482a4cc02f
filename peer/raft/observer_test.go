package raft

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/internal/peertest"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/storetest"
)

// observerURL is member URL u without id and state-dir, with the secret
// file replaced if secretFile is set.
func observerURL(t testing.TB, u, secretFile string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Del("id")
	q.Del("state-dir")
	if secretFile != "" {
		q.Set("secret-file", secretFile)
	}
	return "peer://?" + q.Encode()
}

// openPeerCluster opens n raft members from peer URLs and returns them as
// a cluster with the URLs.
func openPeerCluster(t testing.TB, n int) (*tcpCluster, []string) {
	t.Helper()
	urls := peerURLs(t, n, "")
	c := &tcpCluster{t: t, hb: 300 * time.Millisecond, nodes: make([]*Node, n)}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	for i, u := range urls {
		s, err := tenure.Open(context.Background(), u)
		if err != nil {
			t.Fatalf("Open(%s): %v", tenure.Redact(u), err)
		}
		c.nodes[i] = s.(*Node)
		c.members = append(c.members, c.nodes[i].cfg.self())
	}
	return c, urls
}

// openTestObserver opens the observer of raw, a peer URL without id, closed
// when t ends.
func openTestObserver(t testing.TB, raw string) tenure.Store {
	t.Helper()
	s := storetest.OpenClosing(t, tenure.Open, raw)
	if _, member := s.(*Node); member {
		t.Fatal("a raft peer URL without id opened a member's node, want an observer")
	}
	return s
}

// An observer (the peer URL without id) reports the leader and term the
// members agree on, and its watch delivers the next leader after the first
// is killed; it is never part of the raft configuration.
func TestObserver(t *testing.T) {
	c, urls := openPeerCluster(t, 3)
	li := c.awaitLeader(30*tcpHB, -1)
	s := openTestObserver(t, observerURL(t, urls[0], ""))
	o := s
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	term := c.nodes[li].Raft().CurrentTerm()
	r, err := o.Get(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if r.Holder != c.members[li].ID || r.Term != term {
		t.Fatalf("observer Get = %+v; want %s in term %d", r, c.members[li].ID, term)
	}
	w := peertest.WatchFrom(t, ctx, o, "job", r)
	c.stop(li)
	// Raft elects one leader a term: a holder in a later term is new.
	got := peertest.NextHolder(t, w, "", term, 30*time.Second)
	ni := c.awaitLeader(30*tcpHB, li)
	if got.Holder != c.members[ni].ID || got.Term <= term {
		t.Fatalf("the watch reported %s in term %d; the members agree on %s (old term %d)", got.Holder, got.Term, c.members[ni].ID, term)
	}
	if now := c.nodes[ni].Raft().CurrentTerm(); got.Term != now {
		t.Fatalf("the watch reported term %d, the leader is in %d", got.Term, now)
	}
	conf := c.nodes[ni].Raft().GetConfiguration()
	if err := conf.Error(); err != nil {
		t.Fatal(err)
	}
	if n := len(conf.Configuration().Servers); n != 3 {
		t.Fatalf("the raft configuration has %d servers, want the 3 members", n)
	}
	if _, err := o.Acquire(ctx, "job", "1", time.Second); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("observer Acquire = %v, want ErrInvalid", err)
	}
}

// An observer without the secret fails its TLS handshake with every member
// and learns nothing; the members count the refusals.
func TestObserverWrongSecret(t *testing.T) {
	c, urls := openPeerCluster(t, 3)
	c.awaitLeader(30*tcpHB, -1)
	wrong := peertest.WriteSecret(t, "not-the-cluster-secret-but-long-enough!!")
	s := openTestObserver(t, observerURL(t, urls[0], wrong))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := s.Get(ctx, "job")
	t.Logf("Get with the wrong secret: %v", err)
	if !errors.Is(err, transport.ErrUnreachable) || r != (tenure.Record{}) {
		t.Fatalf("Get with the wrong secret = %+v, %v; want nothing and an error", r, err)
	}
	for _, m := range c.members {
		if !strings.Contains(err.Error(), fmt.Sprintf("member %s at %s", m.ID, m.Addr)) {
			t.Fatalf("the error does not name member %s: %v", m.ID, err)
		}
	}
	if strings.Contains(err.Error(), "not-the-cluster-secret") || strings.Contains(err.Error(), "an-example-shared-secret") {
		t.Fatalf("the error quotes a secret: %v", err)
	}
}

// A member closing ends the status connections it served, and its status
// goroutines (Close waits for them: a leak would hang here).
func TestObserverMemberCloses(t *testing.T) {
	c, urls := openPeerCluster(t, 3)
	c.awaitLeader(30*tcpHB, -1)
	s := openTestObserver(t, observerURL(t, urls[0], ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Get(ctx, "job"); err != nil {
		t.Fatal(err)
	}
	for i := range c.nodes {
		c.stop(i)
	}
	if _, err := s.Get(ctx, "job"); !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Get with every member closed = %v, want ErrUnreachable", err)
	}
}
