package peer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
)

// observerURL is the URL of an observer of g: g's member URL without id or
// state-dir, with the given secret file.
func (g *tcpGroup) observerURL(secretFile string) string {
	return fmt.Sprintf("peer://?peers=%s&algorithm=%s&secret-file=%s&heartbeat=50ms&timeout=300ms",
		g.group, g.alg, secretFile)
}

func openObserver(t testing.TB, raw string) *peer.Observer {
	t.Helper()
	st, err := tenure.Open(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o, ok := st.(*peer.Observer)
	if !ok {
		t.Fatalf("a peer URL without id opened a %T, want *peer.Observer", st)
	}
	return o
}

// nextHolder reads w until a record names want (any holder if want is "")
// with a term above after, failing t after d. It fails if a record's
// holder has a term below one seen before for a holder.
func nextHolder(t *testing.T, w <-chan tenure.Record, want string, after uint64, d time.Duration) tenure.Record {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	var seen []tenure.Record
	for {
		select {
		case r, ok := <-w:
			if !ok {
				t.Fatalf("the watch ended; records so far %+v", seen)
			}
			seen = append(seen, r)
			if r.Held() && r.Term < after {
				t.Fatalf("the watch went back to term %d after %d: %+v", r.Term, after, seen)
			}
			if r.Held() && r.Term > after && (want == "" || r.Holder == want) {
				return r
			}
		case <-timer.C:
			t.Fatalf("no record of %q above term %d within %s; got %+v", want, after, d, seen)
		}
	}
}

// TestObserverTCP: for each algorithm, an observer of a 3-member group on
// loopback reports the coordinator and epoch the members agree on, and its
// watch delivers the next coordinator after the first is killed.
func TestObserverTCP(t *testing.T) {
	for _, alg := range []string{"bully", "ring", "lowest"} {
		t.Run(alg, func(t *testing.T) {
			g := newTCPGroup(t, alg, 3)
			for id := uint64(1); id <= 3; id++ {
				g.start(id)
			}
			want := map[string][2]uint64{"bully": {3, 2}, "lowest": {1, 2}, "ring": {3, 2}}[alg]
			leader, epoch := g.awaitLeader(want[0], 5*time.Second)
			o := openObserver(t, g.observerURL(g.secret))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := o.Get(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if r.Key != "job" || r.Holder != strconv.FormatUint(leader, 10) || r.Term != epoch ||
				r.TTL != 300*time.Millisecond || r.Remaining <= 0 || r.Remaining > r.TTL {
				t.Fatalf("observer Get = %+v; want member %d at epoch %d, ttl 300ms", r, leader, epoch)
			}
			w, err := o.Watch(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if first := <-w; first.Holder != r.Holder || first.Term != r.Term {
				t.Fatalf("first watch record %+v, want %+v", first, r)
			}
			g.stop(leader)
			got := nextHolder(t, w, strconv.FormatUint(want[1], 10), epoch, 10*time.Second)
			next, e2 := g.awaitLeader(want[1], 5*time.Second)
			if got.Holder != strconv.FormatUint(next, 10) || got.Term != e2 {
				t.Fatalf("the watch reported %s@%d; the members agree on %d@%d", got.Holder, got.Term, next, e2)
			}
			// The observer was never a member: nobody follows it, and each
			// live member answered it.
			for id, n := range g.nodes {
				if n == nil {
					continue
				}
				if s := n.Status(); s.Leader != next {
					t.Fatalf("member %d follows %d", id, s.Leader)
				}
				if st := n.Transport().(*peer.TCP).Stats(); st.Queries == 0 {
					t.Fatalf("member %d answered no status query: %+v", id, st)
				}
			}
		})
	}
}

// TestObserverWrongSecret: an observer with another secret gets an error
// naming every member and learns nothing; the members count its frames as
// failing authentication.
func TestObserverWrongSecret(t *testing.T) {
	g := newTCPGroup(t, "bully", 3)
	for id := uint64(1); id <= 3; id++ {
		g.start(id)
	}
	g.awaitLeader(3, 5*time.Second)
	o := openObserver(t, g.observerURL(writeSecret(t, "a-wrong-secret-that-is-long-enough-to-load")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := o.Get(ctx, "job")
	if err == nil || !errors.Is(err, peer.ErrUnreachable) {
		t.Fatalf("Get with the wrong secret = %+v, %v; want an error", r, err)
	}
	t.Logf("Get with the wrong secret: %v", err)
	if r != (tenure.Record{}) {
		t.Fatalf("Get with the wrong secret returned %+v", r)
	}
	for id := uint64(1); id <= 3; id++ {
		if !strings.Contains(err.Error(), fmt.Sprintf("member %d at %s", id, g.group.Addr(id))) {
			t.Fatalf("the error does not name member %d: %v", id, err)
		}
	}
	if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("the error shows a secret: %v", err)
	}
	if _, err := o.Watch(ctx, "job"); err == nil {
		t.Fatal("Watch with the wrong secret succeeded")
	}
	for id, n := range g.nodes {
		if st := n.Transport().(*peer.TCP).Stats(); st.BadMAC == 0 || st.Queries != 0 {
			t.Fatalf("member %d: %+v; want the observer's frames failing authentication, none answered", id, st)
		}
	}
}

// TestObserverUnreachable: with no member running, Get fails within its
// context and names the members.
func TestObserverUnreachable(t *testing.T) {
	g := newTCPGroup(t, "ring", 3)
	o := openObserver(t, g.observerURL(g.secret))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := o.Get(ctx, "job")
	if !errors.Is(err, peer.ErrUnreachable) || !strings.Contains(err.Error(), "member 2 at "+g.group.Addr(2)) {
		t.Fatalf("Get of a group that is down = %v", err)
	}
}

// TestObserverCannotCampaign: Acquire, Renew and Release refuse with
// ErrInvalid; after Close every call returns ErrClosed.
func TestObserverCannotCampaign(t *testing.T) {
	g := newTCPGroup(t, "lowest", 3)
	o := openObserver(t, g.observerURL(g.secret))
	ctx := context.Background()
	if _, err := o.Acquire(ctx, "job", "1", time.Second); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "add id=N") {
		t.Fatalf("Acquire = %v, want ErrInvalid saying to add id=N", err)
	}
	l := tenure.Lease{Key: "job", Identity: "1", Term: 1, TTL: time.Second}
	if err := o.Renew(ctx, l); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Renew = %v, want ErrInvalid", err)
	}
	if err := o.Release(ctx, l); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Release = %v, want ErrInvalid", err)
	}
	if _, err := o.Get(ctx, "bad key\n"); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Get of a bad key = %v, want ErrInvalid", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Get(ctx, "job"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
	if _, err := o.Watch(ctx, "job"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Watch after Close = %v, want ErrClosed", err)
	}
	if _, err := o.Acquire(ctx, "job", "1", time.Second); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// rawQuery sends frames on c and returns the first frame read back, or an
// error when the member hangs up.
func rawQuery(t *testing.T, c net.Conn, s peer.Secret, frames ...[]byte) (peer.Message, error) {
	t.Helper()
	for _, f := range frames {
		if _, err := c.Write(f); err != nil {
			return peer.Message{}, err
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, peer.StatusFrameLen)
	if _, err := io.ReadFull(c, buf); err != nil {
		return peer.Message{}, err
	}
	return peer.Decode(s, buf)
}

// TestTCPStatusQueries drives a bare transport with hand-made status
// queries: they are answered from the reporter with the nonce echoed, even
// from a non-member ID; a replayed query is not answered; and a query never
// reaches Recv, so no member counts the asker as alive.
func TestTCPStatusQueries(t *testing.T) {
	g := newTCPGroup(t, "bully", 3)
	secret := testKey(t)
	tr, err := peer.ListenTCP(peer.TCPConfig{Self: 1, Group: g.group, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.SetReporter(func() peer.Report {
		return peer.Report{Leader: 3, LeaderEpoch: 6, Epoch: 7, TTL: time.Second, Remaining: 400 * time.Millisecond}
	})
	dial := func() net.Conn {
		c, err := net.Dial("tcp", g.group.Addr(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	q := peer.Message{Type: peer.StatusQuery, From: peer.ObserverID, To: 1, Incarnation: 77, Seq: 1, Ref: 4242}
	c := dial()
	m, err := rawQuery(t, c, secret, peer.Encode(secret, q))
	if err != nil {
		t.Fatal(err)
	}
	want := peer.Message{Type: peer.StatusReply, From: 1, To: peer.ObserverID, Ref: 4242, Leader: 3, LeaderEpoch: 6,
		Epoch: 7, TTL: time.Second, Remaining: 400 * time.Millisecond, Incarnation: m.Incarnation, Seq: m.Seq}
	if m != want {
		t.Fatalf("reply %v, want %v", m, want)
	}
	// The same query replayed on another connection gets no answer: the
	// next reply read there is the one to a fresh query.
	q2 := q
	q2.Seq, q2.Ref = 2, 5151
	c2 := dial()
	if m, err = rawQuery(t, c2, secret, peer.Encode(secret, q), peer.Encode(secret, q2)); err != nil || m.Ref != 5151 {
		t.Fatalf("after a replay and a fresh query: %v, %v; want the fresh query's reply", m, err)
	}
	// A non-member ID may ask too.
	q3 := peer.Message{Type: peer.StatusQuery, From: 999, To: 1, Incarnation: 78, Seq: 1, Ref: 6}
	if m, err = rawQuery(t, c2, secret, peer.Encode(secret, q3)); err != nil || m.Ref != 6 || m.To != 999 {
		t.Fatalf("query from 999: %v, %v", m, err)
	}
	// Queries never reach Recv: the first message there is the heartbeat
	// sent after them, from member 2.
	q4 := peer.Message{Type: peer.StatusQuery, From: 2, To: 1, Incarnation: 9, Seq: 1, Ref: 8}
	hb := peer.Encode(secret, peer.Message{Type: peer.Heartbeat, From: 2, To: 1, Incarnation: 9, Seq: 2, Leader: 2, LeaderEpoch: 2})
	if m, err = rawQuery(t, c, secret, peer.Encode(secret, q4), hb); err != nil || m.Ref != 8 {
		t.Fatalf("query from member 2: %v, %v", m, err)
	}
	select {
	case got := <-tr.Recv():
		if got.Type != peer.Heartbeat || got.From != 2 {
			t.Fatalf("Recv delivered %v; want only member 2's heartbeat", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat never arrived")
	}
	// A reply sent to a member is dropped (members never ask).
	reply := peer.Encode(secret, peer.Message{Type: peer.StatusReply, From: 2, To: 1, Incarnation: 9, Seq: 3})
	if m, err = rawQuery(t, c, secret, reply, peer.Encode(secret, peer.Message{Type: peer.StatusQuery, To: 1, Incarnation: 9, Seq: 4, From: 2, Ref: 10})); err != nil || m.Ref != 10 {
		t.Fatalf("after a stray reply: %v, %v", m, err)
	}
	if st := tr.Stats(); st.Queries != 5 || st.Replayed != 1 || st.Misaddressed != 1 {
		t.Fatalf("stats %+v; want 5 queries answered, 1 replayed, 1 misaddressed", st)
	}
}

// TestTCPObserversCannotLockOut fills every inbound slot with observers'
// authenticated, idle connections; a member still gets through, since the
// oldest observer connection is evicted for it.
func TestTCPObserversCannotLockOut(t *testing.T) {
	g := newTCPGroup(t, "bully", 2)
	secret := testKey(t)
	tr1, err := peer.ListenTCP(peer.TCPConfig{Self: 1, Group: g.group, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer tr1.Close()
	tr1.SetReporter(func() peer.Report { return peer.Report{} })
	for i := range 4 * g.group.Len() {
		c, err := net.Dial("tcp", g.group.Addr(1))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		q := peer.Message{Type: peer.StatusQuery, To: 1, Incarnation: uint64(100 + i), Seq: 1, Ref: uint64(i)}
		if _, err := rawQuery(t, c, secret, peer.Encode(secret, q)); err != nil {
			t.Fatalf("observer %d: %v", i, err)
		}
	}
	tr2, err := peer.ListenTCP(peer.TCPConfig{Self: 2, Group: g.group, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if err := tr2.Send(peer.Message{Type: peer.Heartbeat, To: 1, Leader: 2, LeaderEpoch: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-tr1.Recv():
		if m.From != 2 {
			t.Fatalf("got %v", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the member's frame never arrived: %+v", tr1.Stats())
	}
	if st := tr1.Stats(); st.Rejected == 0 {
		t.Fatalf("no observer was evicted: %+v", st)
	}
}
