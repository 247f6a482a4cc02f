package raft

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
)

// tcpHB is the heartbeat timeout of the loopback clusters: long enough that
// a loaded 2-core machine running the race detector rarely misses one.
const tcpHB = 300 * time.Millisecond

type tcpCluster struct {
	t       testing.TB
	hb      time.Duration
	members []Member
	dirs    []string
	secret  []byte
	nodes   []*Node
}

func newSecret(t testing.TB) []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

// newTCPCluster starts n members on loopback with the authenticated
// transport, each with its own data directory.
func newTCPCluster(t testing.TB, n int, hb time.Duration) *tcpCluster {
	c := &tcpCluster{t: t, hb: hb, secret: newSecret(t), nodes: make([]*Node, n)}
	for i := range n {
		c.members = append(c.members, Member{ID: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))})
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), c.members[i].ID))
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	return c
}

func (c *tcpCluster) config(i int, secret []byte) Config {
	return Config{
		ID: c.members[i].ID, Members: c.members, Dir: c.dirs[i], Secret: secret,
		HeartbeatTimeout: c.hb, ElectionTimeout: c.hb, LeaderLeaseTimeout: c.hb / 2,
		Logger: hclog.NewNullLogger(),
	}
}

func (c *tcpCluster) start(i int) *Node {
	n, err := New(c.config(i, c.secret))
	if err != nil {
		c.t.Fatalf("start %s: %v", c.members[i].ID, err)
	}
	c.nodes[i] = n
	return n
}

func (c *tcpCluster) stop(i int) {
	if n := c.nodes[i]; n != nil {
		c.nodes[i] = nil
		if err := n.Close(); err != nil {
			c.t.Errorf("close %s: %v", c.members[i].ID, err)
		}
	}
}

// awaitLeader waits on watch events until every running member names the
// same leader, which is running, is not excluded, and leads by raft.
func (c *tcpCluster) awaitLeader(timeout time.Duration, not int) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	changed := watchAll(ctx, c.t, c.nodes)
	for {
		if l := c.agreed(); l >= 0 && l != not {
			return l
		}
		select {
		case <-changed:
		case <-ctx.Done():
			c.t.Fatalf("no agreed leader within %s", timeout)
		}
	}
}

// agreed returns the member every running member names as leader, or -1.
func (c *tcpCluster) agreed() int {
	leader := ""
	for _, n := range c.nodes {
		if n == nil {
			continue
		}
		_, id := n.Raft().LeaderWithID()
		if id == "" || (leader != "" && string(id) != leader) {
			return -1
		}
		leader = string(id)
	}
	for i, m := range c.members {
		if m.ID == leader && c.nodes[i] != nil && c.nodes[i].Raft().State() == hraft.Leader {
			return i
		}
	}
	return -1
}

// Three members on loopback TCP elect a leader; killing it elects another
// in a higher term; the killed member restarts from its directory without
// its term going back.
func TestTCPElectKillReelect(t *testing.T) {
	c := newTCPCluster(t, 3, tcpHB)
	ctx := context.Background()
	li := c.awaitLeader(20*tcpHB, -1)
	l, err := c.nodes[li].Acquire(ctx, "k", c.members[li].ID, tcpHB)
	if err != nil {
		t.Fatalf("leader Acquire: %v", err)
	}
	c.stop(li)
	killed := time.Now()
	// The agreed leader can lose raft leadership again before its Acquire
	// confirms it with a quorum round (a slow heartbeat on a busy machine):
	// that is ErrUnavailable, which passes by itself, and an elector
	// retries it; so does this test, a few times.
	var ni int
	var l2 tenure.Lease
	for try := 0; ; try++ {
		ni = c.awaitLeader(30*tcpHB, li)
		if l2, err = c.nodes[ni].Acquire(ctx, "k", c.members[ni].ID, tcpHB); err == nil {
			break
		}
		if !errors.Is(err, tenure.ErrUnavailable) || try == 3 {
			t.Fatalf("new leader Acquire: %v", err)
		}
		t.Logf("new leader Acquire: %v; again", err)
	}
	t.Logf("re-elected %s %s after killing %s", c.members[ni].ID, time.Since(killed).Round(time.Millisecond), c.members[li].ID)
	if l2.Term <= l.Term {
		t.Fatalf("term went from %d to %d", l.Term, l2.Term)
	}
	n := c.start(li)
	if got := n.Raft().CurrentTerm(); got < l.Term {
		t.Fatalf("restarted member is in term %d, below its own grant's %d", got, l.Term)
	}
	if _, err := n.Acquire(ctx, "k", c.members[li].ID, tcpHB); !errors.Is(err, tenure.ErrHeld) && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("restarted member Acquire: got %v, want HeldError or ErrNoLeader", err)
	}
	if got := c.awaitLeader(30*tcpHB, -1); c.nodes[got].Raft().CurrentTerm() < l2.Term {
		t.Fatalf("term went back after the restart")
	}
}

// A process without the secret cannot vote: with one real member and an
// impostor in another member's place, no quorum forms, and both sides
// reject each other's connections. With the real member back, one does.
func TestTCPOutsiderCannotVote(t *testing.T) {
	c := &tcpCluster{t: t, hb: tcpHB, secret: newSecret(t), nodes: make([]*Node, 3)}
	for i := range 3 {
		c.members = append(c.members, Member{ID: fmt.Sprintf("n%d", i), Addr: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))})
		c.dirs = append(c.dirs, filepath.Join(t.TempDir(), c.members[i].ID))
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
	})
	real0 := c.start(0)
	impostor, err := New(c.config(1, newSecret(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()

	// Wait until each side has refused several of the other's
	// connections: several election rounds have been tried.
	deadline := time.Now().Add(60 * tcpHB)
	for real0.layer.rejected.Load() < 3 || impostor.layer.rejected.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("handshakes not refused: real member refused %d, impostor %d",
				real0.layer.rejected.Load(), impostor.layer.rejected.Load())
		}
		time.Sleep(tcpHB / 10) // polling counters: there is no event for a refused handshake
	}
	for _, n := range []*Node{real0, impostor} {
		if n.Raft().State() == hraft.Leader {
			t.Fatalf("%s became leader without a quorum", n.ID())
		}
		if _, err := n.Acquire(context.Background(), "k", n.ID(), tcpHB); err == nil {
			t.Fatalf("%s acquired without a quorum", n.ID())
		}
	}
	impostor.Close()
	c.start(1)
	c.awaitLeader(30*tcpHB, -1)
}

// The transport refuses a client with another secret and one that does not
// speak TLS, and accepts one with the cluster's secret.
func TestTransportHandshake(t *testing.T) {
	l, member := testLayer(t, newSecret(t), nil, maxHandshakes)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()

	other, err := clusterTLS(newSecret(t))
	if err != nil {
		t.Fatal(err)
	}
	otherPSK, _ := preauthKey([]byte("another-secret-of-enough-bytes-0123"))
	stranger := &tlsLayer{conf: other, psk: otherPSK}
	if c, err := stranger.Dial(hraft.ServerAddress(l.Addr().String()), 5*time.Second); err == nil {
		// TLS 1.3 clients may finish before the server verified them;
		// the server then closes the connection.
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, rerr := c.Read(make([]byte, 1)); rerr == nil {
			t.Fatal("a client with another secret exchanged data")
		}
		c.Close()
	}
	plain, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	plain.Write([]byte("not a TLS client hello at all, nor a raft one\r\n\r\n"))
	plain.SetReadDeadline(time.Now().Add(5 * time.Second))
	plain.Read(make([]byte, 64))
	plain.Close()

	c, err := member.Dial(hraft.ServerAddress(l.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("member dial: %v", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-accepted:
		s.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the member's connection was not accepted")
	}
	if got := l.rejected.Load(); got != 2 {
		t.Fatalf("rejected %d connections, want 2 (the stranger and the plain client)", got)
	}
	if _, ok := c.(*tls.Conn); !ok {
		t.Fatalf("dialled connection is %T, not TLS", c)
	}
}
