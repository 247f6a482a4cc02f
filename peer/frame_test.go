package peer

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

const internalSecret = "0123456789abcdef0123456789abcdef-test-secret"

func testGroupKey(t testing.TB, key string) groupKey {
	t.Helper()
	s, err := NewSecret([]byte(internalSecret))
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewGroup([]Member{{ID: 1}, {ID: 2}, {ID: 3}})
	if err != nil {
		t.Fatal(err)
	}
	gk, err := deriveGroupKey(s, key, "bully", g)
	if err != nil {
		t.Fatal(err)
	}
	return gk
}

// testSessions returns the two ends of a connection from dialer 2 to
// acceptor 1, as the handshake would derive them.
func testSessions(gk groupKey, seed byte) (dialer, acceptor *session) {
	nd, na := bytes.Repeat([]byte{seed}, nonceLen), bytes.Repeat([]byte{seed + 1}, nonceLen)
	return newSession(gk, 2, 1, nd, na, true), newSession(gk, 2, 1, nd, na, false)
}

// TestFrameRoundTrip: a sealed frame opens on the other end of its own
// connection, with every field; any flipped bit, another connection's
// session, another group's key or a second delivery is refused with the
// right error.
func TestFrameRoundTrip(t *testing.T) {
	gk := testGroupKey(t, "jobs")
	d, a := testSessions(gk, 1)
	m := Message{Type: StatusReply, Flags: FlagAbstain, From: 2, To: 1, Incarnation: 1 << 60,
		Epoch: 9, Leader: 3, LeaderEpoch: 9, Candidate: 3, Ref: 7, Hops: 2, TTL: time.Second, Remaining: time.Millisecond}
	f := d.out.seal(byte(m.Type), m)
	if len(f) != FrameLen {
		t.Fatalf("frame is %d bytes, want %d", len(f), FrameLen)
	}
	for i := range len(f) * 8 {
		g := bytes.Clone(f)
		g[i/8] ^= 1 << (i % 8)
		in := a.in
		if _, _, err := in.open(g); err == nil {
			t.Fatalf("a frame with bit %d flipped was accepted", i)
		}
	}
	in := a.in
	_, got, err := in.open(f)
	m.Seq = 1
	if err != nil || got != m {
		t.Fatalf("open = %v, %v; want %v", got, err, m)
	}
	if _, _, err := in.open(f); !errors.Is(err, ErrReplayed) {
		t.Fatalf("the same frame again: %v, want ErrReplayed", err)
	}
	_, other := testSessions(gk, 7) // another connection of the same group
	if _, _, err := other.in.open(f); !errors.Is(err, ErrStale) {
		t.Fatalf("on another connection: %v, want ErrStale", err)
	}
	_, b := testSessions(testGroupKey(t, "other-key"), 1) // same secret, another key
	if _, _, err := b.in.open(f); !errors.Is(err, ErrOtherGroup) {
		t.Fatalf("in another group: %v, want ErrOtherGroup", err)
	}
}

// FuzzFrameDecode: the decoders of message and handshake frames never
// panic, whatever the bytes, and a message frame opens only if its MAC is
// right (a sealed frame re-seals to itself).
func FuzzFrameDecode(f *testing.F) {
	gk := testGroupKey(f, "jobs")
	d, _ := testSessions(gk, 1)
	for _, m := range []Message{
		{Type: Heartbeat, From: 2, To: 1, Leader: 2, LeaderEpoch: 1},
		{Type: Election, From: 2, To: 1, Candidate: 2, Hops: 1},
		{Type: StatusQuery, From: ObserverID, To: 1, Ref: 99},
		{Type: StatusReply, From: 2, To: 1, Ref: 99, TTL: time.Second},
	} {
		f.Add(d.out.seal(byte(m.Type), m))
	}
	f.Add(d.out.seal(kindKeepalive, Message{From: 2, To: 1}))
	for _, k := range []byte{kindHello, kindChallenge, kindProof, kindWelcome} {
		f.Add(encodeHandshake(header{kind: k, group: gk.tag, from: 2, to: 1}, bytes.Repeat([]byte{k}, nonceLen)))
	}
	f.Add([]byte{0, 0, 0, 4, 3, 2, 1, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, k := range []byte{kindHello, kindChallenge, kindProof, kindWelcome} {
			if h, v, err := decodeHandshake(b, gk.tag, k); err == nil && (len(v) != nonceLen || h.kind != k) {
				t.Fatalf("handshake frame %x decoded to %+v %x", b, h, v)
			}
		}
		_, a := testSessions(gk, 1)
		in := a.in
		in.seq = 0
		kind, m, err := in.open(b)
		if err != nil {
			return
		}
		re, _ := testSessions(gk, 1)
		if kind == kindKeepalive {
			m = Message{From: 2, To: 1}
		}
		m.Seq = 0
		if got := re.out.seal(kind, m); !bytes.Equal(got, b) {
			t.Fatalf("accepted frame %x re-seals to %x", b, got)
		}
	})
}

// TestGroupKeys: the group key depends on the key name, the algorithm and
// the member IDs (not addresses); the tag is public and differs with them.
func TestGroupKeys(t *testing.T) {
	s, _ := NewSecret([]byte(internalSecret))
	mk := func(key, alg string, ms ...Member) groupKey {
		g, err := NewGroup(ms)
		if err != nil {
			t.Fatal(err)
		}
		gk, err := deriveGroupKey(s, key, alg, g)
		if err != nil {
			t.Fatal(err)
		}
		return gk
	}
	base := mk("k", "bully", Member{ID: 1, Addr: "a:1"}, Member{ID: 2, Addr: "a:2"})
	same := mk("k", "bully", Member{ID: 2, Addr: "b:2"}, Member{ID: 1, Addr: "b:1"})
	if !bytes.Equal(base.key, same.key) || base.tag != same.tag {
		t.Fatal("the same group written with other addresses derived another key")
	}
	for name, other := range map[string]groupKey{
		"key":       mk("k2", "bully", Member{ID: 1}, Member{ID: 2}),
		"algorithm": mk("k", "ring", Member{ID: 1}, Member{ID: 2}),
		"members":   mk("k", "bully", Member{ID: 1}, Member{ID: 3}),
	} {
		if bytes.Equal(base.key, other.key) || base.tag == other.tag {
			t.Errorf("another %s derived the same key or tag", name)
		}
	}
	if fmt.Sprint(base.key) == "" || bytes.Contains(base.key, []byte(internalSecret[:8])) {
		t.Fatal("the group key shows the secret")
	}
}
