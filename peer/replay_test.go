package peer_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/bully"
	"github.com/tenurehq/tenure/peer/tcp"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// These tests replay what an eavesdropper recorded on a member's link.
// They use only the package's public API and raw TCP, so they also run
// (and fail) against the transport of protocol versions 1 and 2, whose
// frames were valid on any connection and whose replay state was lost on
// restart.

// recorder is a TCP relay in front of target that records what each
// client sent: an eavesdropper on the link.
type recorder struct {
	ln      net.Listener
	target  string
	mu      sync.Mutex
	streams []*bytes.Buffer
	conns   []net.Conn
}

func newRecorder(t *testing.T, target string) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{ln: ln, target: target}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			buf := &bytes.Buffer{}
			r.mu.Lock()
			r.streams = append(r.streams, buf)
			r.conns = append(r.conns, c, s)
			r.mu.Unlock()
			wg.Go(func() {
				io.Copy(s, io.TeeReader(c, lockedWriter{&r.mu, buf}))
				s.Close()
			})
			wg.Go(func() { io.Copy(c, s); c.Close() })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			c.Close()
		}
		r.mu.Unlock()
		wg.Wait()
	})
	return r
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

func (r *recorder) addr() string { return r.ln.Addr().String() }

// recorded returns a copy of each connection's client-to-server bytes.
func (r *recorder) recorded() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, b := range r.streams {
		out = append(out, bytes.Clone(b.Bytes()))
	}
	return out
}

// frames splits recorded streams at their length prefixes.
func frames(streams [][]byte) [][]byte {
	var out [][]byte
	for _, s := range streams {
		for len(s) >= 4 {
			n := 4 + int(binary.BigEndian.Uint32(s))
			if n > len(s) {
				break
			}
			out = append(out, s[:n])
			s = s[n:]
		}
	}
	return out
}

// replay opens a connection to addr, writes b and waits until the
// receiver closes it or 2s passed (a receiver that accepts replays keeps
// the connection). It returns the connection, closed unless keep is set.
func replay(t *testing.T, addr string, b []byte, keep bool) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(b)
	if keep {
		t.Cleanup(func() { c.Close() })
		return c
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	io.Copy(io.Discard, c)
	c.Close()
	return c
}

// withAddr returns g with member id at addr: what a member sees when its
// link to id runs through an eavesdropper.
func withAddr(t *testing.T, g transport.Group, id uint64, addr string) transport.Group {
	t.Helper()
	ms := g.Members()
	for i := range ms {
		if ms[i].ID == id {
			ms[i].Addr = addr
		}
	}
	v, err := transport.NewGroup(ms)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// counter reads a tcp.Stats field by name, 0 if the field does not exist.
func counter(st tcp.Stats, name string) uint64 {
	f := reflect.ValueOf(st).FieldByName(name)
	if !f.IsValid() {
		return 0
	}
	return f.Uint()
}

// recordedLink starts the transports of members 1 and 2 of a bully group,
// member 2 reaching 1 through a recorder.
func recordedLink(t *testing.T) (*tcpGroup, *recorder, *tcp.Transport, *tcp.Transport) {
	g := newTCPGroup(t, "bully", 2)
	secret := testKey(t)
	discard := slog.New(slog.DiscardHandler)
	rec := newRecorder(t, g.group.Addr(1))
	t1, err := tcp.Listen(tcp.Config{Self: 1, Group: g.group, Secret: secret, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t2, err := tcp.Listen(tcp.Config{Self: 2, Group: withAddr(t, g.group, 1, rec.addr()), Secret: secret, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	return g, rec, t1, t2
}

// TestTCPReplayAfterRestart records member 2's frames to member 1, restarts
// member 1, and replays them: nothing is delivered (the recorded handshake
// does not answer the new connection's challenge), and the refusal is
// counted.
func TestTCPReplayAfterRestart(t *testing.T) {
	g, rec, t1, t2 := recordedLink(t)
	secret, discard := testKey(t), slog.New(slog.DiscardHandler)
	defer t2.Close()
	for i := uint64(1); i <= 3; i++ {
		if err := t2.Send(wire.Message{Type: wire.Coordinator, To: 1, Leader: 2, LeaderEpoch: 41, Ref: i}); err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-t1.Recv():
			if m.Ref != i {
				t.Fatalf("got %v, want ref %d", m, i)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("member 2's frame never arrived")
		}
	}
	t1.Close()
	t1, err := tcp.Listen(tcp.Config{Self: 1, Group: g.group, Secret: secret, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	streams := rec.recorded()
	for _, s := range streams {
		replay(t, g.group.Addr(1), s, false)
	}
	for _, f := range frames(streams) {
		replay(t, g.group.Addr(1), f, false)
	}
	select {
	case m := <-t1.Recv():
		t.Fatalf("a frame recorded before the restart was delivered after it: %v", m)
	default:
	}
	if st := t1.Stats(); st.Received != 0 || st.BadMAC+st.Malformed == 0 {
		t.Fatalf("stats %+v; want nothing received and the replays refused", st)
	}
}

// TestTCPReplayExhaustion: after member 1 restarts, an eavesdropper
// replays member 2's recorded frames to it, one per connection, holding
// every connection open (enough to fill every inbound slot). Member 2,
// the real one, must still get in.
func TestTCPReplayExhaustion(t *testing.T) {
	g, rec, t1, t2 := recordedLink(t)
	secret, discard := testKey(t), slog.New(slog.DiscardHandler)
	slots := 4 * g.group.Len()
	for i := uint64(1); i <= uint64(2*slots); i++ {
		if err := t2.Send(wire.Message{Type: wire.Heartbeat, To: 1, Leader: 2, LeaderEpoch: 3, Ref: i}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-t1.Recv():
		case <-time.After(5 * time.Second):
			t.Fatal("member 2's frame never arrived")
		}
	}
	t2.Close()
	t1.Close()
	t1, err := tcp.Listen(tcp.Config{Self: 1, Group: g.group, Secret: secret, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	for _, f := range frames(rec.recorded()) {
		c := replay(t, g.group.Addr(1), f, true)
		// Pace the attack: each frame is taken before the next is sent
		// (or the connection is closed).
		c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		c.Read(make([]byte, 1))
	}
	t2, err = tcp.Listen(tcp.Config{Self: 2, Group: g.group, Secret: secret, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case m := <-t1.Recv():
			if m.Ref == 999 {
				return // the real member got in
			}
		case <-tick.C:
			t2.Send(wire.Message{Type: wire.Heartbeat, To: 1, Leader: 2, LeaderEpoch: 3, Ref: 999})
		case <-deadline:
			t.Fatalf("the real member 2 was locked out by replayed connections: member 1's transport %+v", t1.Stats())
		}
	}
}

// TestPeerReplayExhaustionNoSplit is the attack of issue 8 on a Bully
// group: an eavesdropper records the coordinator's (3's) link to member 1;
// 3 and 1 go down, 1 restarts, and the eavesdropper at once replays the
// recorded frames, one per connection, holding every connection open.
// Member 1 must still hear member 2 (the group agrees on 2), and at no
// instant may two members be coordinator.
func TestPeerReplayExhaustionNoSplit(t *testing.T) {
	g := newTCPGroup(t, "bully", 3)
	rec := newRecorder(t, g.group.Addr(1))
	start := func(id uint64, view transport.Group) {
		u, err := urlParse(g.url(id))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := peer.ParseURL(u)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Group, cfg.Logger = view, slog.New(slog.DiscardHandler)
		n, err := openNode(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g.nodes[id] = n
	}
	start(1, g.group)
	start(2, g.group)
	start(3, withAddr(t, g.group, 1, rec.addr())) // 3's link to 1 is recorded
	g.awaitLeader(3, 5*time.Second)
	// Enough heartbeats recorded to fill every inbound slot of member 1.
	for deadline := time.Now().Add(10 * time.Second); len(frames(rec.recorded())) < 6*g.group.Len(); {
		if time.Now().After(deadline) {
			t.Fatalf("only %d frames recorded", len(frames(rec.recorded())))
		}
		time.Sleep(20 * time.Millisecond)
	}
	g.stop(3)
	g.stop(1)
	start(1, g.group)
	for _, f := range frames(rec.recorded()) {
		c := replay(t, g.group.Addr(1), f, true)
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond)) // pace the attack
		c.Read(make([]byte, 1))
	}
	// Watch for several timeouts: never two coordinators at once; then the
	// live members must agree on 2.
	for until := time.Now().Add(2 * time.Second); time.Now().Before(until); time.Sleep(5 * time.Millisecond) {
		var coords []uint64
		for id, n := range g.nodes {
			if n == nil {
				continue
			}
			if s := n.Status(); s.Coordinator {
				coords = append(coords, id)
			}
		}
		if len(coords) > 1 {
			t.Fatalf("two coordinators at once after the replay: %v (member 1's transport: %+v)", coords,
				g.nodes[1].Transport().(*tcp.Transport).Stats())
		}
	}
	g.awaitLeader(2, 5*time.Second)
}

// TestPeerCrossGroupReplay: two groups share one secret file, with other
// keys. Frames recorded in group A, where member 2 leads at a high epoch,
// replayed to group B's coordinator (member 1, alone), change nothing
// there: B's coordinator keeps its epoch, and the refusal is counted as
// another group's.
func TestPeerCrossGroupReplay(t *testing.T) {
	secret := writeSecret(t, testSecret)
	mkGroup := func() transport.Group {
		g, err := transport.NewGroup([]transport.Member{
			{ID: 1, Addr: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))},
			{ID: 2, Addr: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))},
		})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	loaded, err := tcp.LoadSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	node := func(key string, id uint64, view transport.Group, epoch uint64) *peer.Node {
		e := &peer.MemEpoch{}
		e.Save(epoch)
		n, err := peer.NewNode(peer.Config{ID: id, Group: view, Algorithm: "bully", Key: key, Secret: loaded,
			Heartbeat: 50 * time.Millisecond, Timeout: 300 * time.Millisecond, Epochs: e,
			Logger: slog.New(slog.DiscardHandler)}, bully.New())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		return n
	}
	a, b := mkGroup(), mkGroup()
	rec := newRecorder(t, a.Addr(1))
	a1 := node("group-a", 1, a, 100)
	a2 := node("group-a", 2, withAddr(t, a, 1, rec.addr()), 100)
	b1 := node("group-b", 1, b, 0) // member 2 of B never runs
	deadline := time.Now().Add(5 * time.Second)
	for !(a2.Status().Coordinator && a1.Status().Leader == 2 && b1.Status().Coordinator) {
		if time.Now().After(deadline) {
			t.Fatalf("no coordinators: A %+v %+v, B %+v", a1.Status(), a2.Status(), b1.Status())
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := b1.Status()
	if a2.Status().LeaderEpoch <= before.Epoch {
		t.Fatalf("group A's epoch %d is not above B's %d: the test proves nothing", a2.Status().LeaderEpoch, before.Epoch)
	}
	for deadline := time.Now().Add(5 * time.Second); len(frames(rec.recorded())) < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nothing recorded in group A")
		}
	}
	streams := rec.recorded()
	for _, s := range streams {
		replay(t, b.Addr(1), s, false)
	}
	for _, f := range frames(streams) {
		replay(t, b.Addr(1), f, false)
	}
	after := b1.Status()
	st := b1.Transport().(*tcp.Transport).Stats()
	if !after.Coordinator || after.LeaderEpoch != before.LeaderEpoch || after.Epoch != before.Epoch || st.Received != 0 {
		t.Fatalf("group A's frames acted on group B: before %+v, after %+v; B's transport %+v", before, after, st)
	}
	if counter(st, "OtherGroup") == 0 {
		t.Fatalf("the replays were not counted as another group's: %+v", st)
	}
}
