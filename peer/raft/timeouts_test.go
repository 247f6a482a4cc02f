package raft

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
)

// TestAcquireRefusesTTLAboveAMembersTimeout: three members on loopback
// TCP, one of them (n2) started with a heartbeat timeout of 2s, the others
// with 300ms. Led by n2, a grant of 2s (its own default TTL) could outlive
// its leadership: n0 and n1 elect another leader 300ms to 600ms after
// losing touch with it. With `tenure run` (timeout=3s on one member), a
// SIGSTOP of that leader let its CMD run 0.5s past the start of the next
// leader's. Acquire must refuse such a ttl with ErrInvalid naming the
// member and both timeouts, and still grant a ttl every member allows.
func TestAcquireRefusesTTLAboveAMembersTimeout(t *testing.T) {
	const hb, long = 300 * time.Millisecond, 2 * time.Second
	c := newTCPCluster(t, 3, hb)
	c.stop(2)
	cfg := c.config(2, c.secret)
	cfg.HeartbeatTimeout, cfg.ElectionTimeout = long, long
	n2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[2] = n2
	for l := c.awaitLeader(10*time.Second, -1); l != 2; l = c.awaitLeader(10*time.Second, -1) {
		m := c.members[2]
		err := c.nodes[l].Raft().LeadershipTransferToServer(hraft.ServerID(m.ID), hraft.ServerAddress(m.Addr)).Error()
		if err != nil {
			t.Logf("transfer to n2: %v (trying again)", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = n2.Acquire(ctx, "k", "n2", long)
	if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "n0 (300ms), n1 (300ms)") {
		t.Fatalf("Acquire with ttl %s on a leader whose fellow members time out after %s = %v, want ErrInvalid naming their timeout", long, hb, err)
	}
	l, err := n2.Acquire(ctx, "k", "n2", hb)
	if err != nil {
		t.Fatalf("Acquire with ttl %s, which every member allows: %v", hb, err)
	}
	if l.Term == 0 {
		t.Fatalf("granted lease without a term: %+v", l)
	}
}

// TestAcquireGrantsWithOneShortTimeout: one member of three with a shorter
// heartbeat timeout (100ms) than the leader's ttl (300ms) cannot elect
// anyone sooner: the third member, of 300ms, must vote too. The leader
// grants.
func TestAcquireGrantsWithOneShortTimeout(t *testing.T) {
	const hb = 300 * time.Millisecond
	c := newTCPCluster(t, 3, hb)
	c.stop(2)
	cfg := c.config(2, c.secret)
	cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = hb/3, hb/3, hb/6
	n2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[2] = n2
	l := c.awaitLeader(10*time.Second, -1)
	for l == 2 {
		if err := n2.Raft().LeadershipTransfer().Error(); err != nil {
			t.Logf("transfer away from n2: %v (trying again)", err)
		}
		l = c.awaitLeader(10*time.Second, -1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.nodes[l].Acquire(ctx, "k", c.members[l].ID, hb); err != nil {
		t.Fatalf("Acquire with ttl %s on %s, one fellow member at %s: %v", hb, c.members[l].ID, hb/3, err)
	}
}
