package peer_test

import (
	"testing"
	"time"

	"github.com/tenurehq/tenure/peer/wire"
)

// TestTCPReflectedFramesRefused: an attacker on the network records member
// 2's link to member 1 and reflects it, whole, back to member 2's own
// listener; then it sends each recorded frame alone to member 1 on a
// fresh connection. Member 2 refuses its own Hello (addressed to member
// 1), member 1 every lone frame; both count them, nothing is delivered,
// and the real link goes on.
func TestTCPReflectedFramesRefused(t *testing.T) {
	g, rec, t1, t2 := recordedLink(t)
	defer t1.Close()
	defer t2.Close()
	for i := uint64(1); i <= 3; i++ {
		if err := t2.Send(wire.Message{Type: wire.Coordinator, To: 1, Leader: 2, LeaderEpoch: 7, Ref: i}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-t1.Recv():
		case <-time.After(5 * time.Second):
			t.Fatal("member 2's frame never arrived")
		}
	}
	stream := rec.recorded()[0] // 2 -> 1: Hello, Proof, three messages
	replay(t, g.group.Addr(2), stream, false)
	if st := t2.Stats(); st.Misaddressed != 1 || st.Received != 0 {
		t.Errorf("member 2 after its own frames were reflected to it: %+v, want one Misaddressed and nothing received", st)
	}
	select {
	case d := <-t2.Recv():
		t.Fatalf("member 2 received its own reflected frame %v", d.Message)
	default:
	}
	before := t1.Stats()
	for _, f := range frames([][]byte{stream}) {
		replay(t, g.group.Addr(1), f, false) // each recorded frame, alone, on a fresh connection
	}
	st := t1.Stats()
	if st.Received != before.Received {
		t.Errorf("member 1 received replayed frames: %+v", st)
	}
	if refused := st.Malformed + st.BadMAC + st.Stale + st.AuthTimeouts - (before.Malformed + before.BadMAC + before.Stale + before.AuthTimeouts); refused == 0 {
		t.Errorf("member 1 counted none of the replayed frames: %+v", st)
	}
	// The real link still works.
	if err := t2.Send(wire.Message{Type: wire.Coordinator, To: 1, Leader: 2, LeaderEpoch: 7, Ref: 99}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-t1.Recv():
		if d.Ref != 99 {
			t.Fatalf("member 1 got %v, want ref 99", d.Message)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the real link stopped working")
	}
}
