package raft

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/peer"
)

// peerURLs returns the peer:// URL of each of n members on loopback.
func peerURLs(t testing.TB, n int, extra string) []string {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "peer.secret")
	if err := os.WriteFile(secretFile, []byte("an-example-shared-secret-of-forty-bytes!!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var peers []string
	for i := 1; i <= n; i++ {
		peers = append(peers, fmt.Sprintf("%d=127.0.0.1:%d", i, testserver.FreePort(t)))
	}
	var urls []string
	for i := 1; i <= n; i++ {
		q := url.Values{
			"id": {fmt.Sprint(i)}, "peers": {strings.Join(peers, ",")}, "algorithm": {"raft"},
			"secret-file": {secretFile}, "state-dir": {dir}, "timeout": {"300ms"},
		}
		urls = append(urls, "peer://?"+q.Encode()+extra)
	}
	return urls
}

// The raft mode opens through tenure.Open like every store and elects.
func TestOpenPeerURL(t *testing.T) {
	ctx := context.Background()
	var nodes []*Node
	for _, u := range peerURLs(t, 3, "&leader-lease-timeout=100ms") {
		s, err := tenure.Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%s): %v", tenure.Redact(u), err)
		}
		t.Cleanup(func() { s.Close() })
		n, ok := s.(*Node)
		if !ok {
			t.Fatalf("Open returned %T, want *raft.Node", s)
		}
		if n.cfg.HeartbeatTimeout != 300*time.Millisecond || n.cfg.LeaderLeaseTimeout != 100*time.Millisecond {
			t.Fatalf("timings not taken from the URL: %+v", n.cfg)
		}
		nodes = append(nodes, n)
	}
	c := &tcpCluster{t: t, nodes: nodes}
	for _, n := range nodes {
		c.members = append(c.members, n.cfg.self())
	}
	li := c.awaitLeader(30*tcpHB, -1)
	if id := nodes[li].ID(); id != fmt.Sprint(li+1) {
		t.Fatalf("member %d has ID %q", li, id)
	}
	if _, err := nodes[li].Acquire(ctx, "k", nodes[li].ID(), 300*time.Millisecond); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := nodes[li].Get(ctx, "other"); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Get of a second key: got %v, want ErrInvalid", err)
	}
	if nodes[li].Raft().State() != hraft.Leader {
		t.Fatal("leader lost leadership")
	}
}

func TestOpenPeerURLInvalid(t *testing.T) {
	ctx := context.Background()
	for name, extra := range map[string]string{
		"unknown param":  "&electon-timeout=1s",
		"bad duration":   "&election-timeout=soon",
		"election < hb":  "&election-timeout=10ms",
		"lease too long": "&leader-lease-timeout=2s",
	} {
		t.Run(name, func(t *testing.T) {
			u := peerURLs(t, 3, extra)[0]
			s, err := tenure.Open(ctx, u)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, tenure.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if strings.Contains(err.Error(), "an-example-shared-secret") {
				t.Fatalf("error quotes the secret: %v", err)
			}
		})
	}
}

// TestOptions: the URL's raft parameters arrive as typed Options, which a
// program may also set itself; options of another type are refused.
func TestOptions(t *testing.T) {
	u, _ := url.Parse(peerURLs(t, 3, "&election-timeout=2s&leader-lease-timeout=100ms")[0])
	pc, err := peer.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pc.Options, (Options{ElectionTimeout: 2 * time.Second, LeaderLeaseTimeout: 100 * time.Millisecond}); got != want {
		t.Fatalf("ParseURL gave Options %#v, want %#v", got, want)
	}
	cfg, err := fromPeer(pc.WithDefaults())
	if err != nil || cfg.ElectionTimeout != 2*time.Second || cfg.LeaderLeaseTimeout != 100*time.Millisecond || cfg.HeartbeatTimeout != 300*time.Millisecond {
		t.Fatalf("fromPeer = %+v, %v", cfg, err)
	}
	pc.Options = struct{}{}
	if _, err := fromPeer(pc); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "raft.Options") {
		t.Fatalf("fromPeer with foreign options: %v", err)
	}
}
