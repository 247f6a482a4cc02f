package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// testConn returns the two ends of one direction of a connection, as the
// handshake would set them up: a session key, the group's tag and the
// connection's tag. seed makes another connection, group another group.
func testConn(group uint64, seed byte) (out, in *Direction) {
	key := bytes.Repeat([]byte{seed}, 32)
	conn := uint64(seed) << 8
	return &Direction{Key: key, Group: group, Conn: conn}, &Direction{Key: key, Group: group, Conn: conn}
}

const testGroup = 0x6a6f6273

// TestFrameRoundTrip: a sealed frame opens on the other end of its own
// connection, with every field; any flipped bit, another connection's
// session, another group's key or a second delivery is refused with the
// right error.
func TestFrameRoundTrip(t *testing.T) {
	out, in := testConn(testGroup, 1)
	m := Message{Type: StatusReply, Flags: FlagAbstain, From: 2, To: 1, Incarnation: 1 << 60,
		Epoch: 9, Leader: 3, LeaderEpoch: 9, Candidate: 3, Ref: 7, Hops: 2, TTL: time.Second, Remaining: time.Millisecond,
		Priority: 7,
		Value:    "10.0.0.7:8080"}
	f := out.Seal(byte(m.Type), m)
	if len(f) != FrameLen+len(m.Value) {
		t.Fatalf("frame is %d bytes, want %d", len(f), FrameLen+len(m.Value))
	}
	for i := range len(f) * 8 {
		g := bytes.Clone(f)
		g[i/8] ^= 1 << (i % 8)
		in := *in
		if _, _, err := in.Open(g); err == nil {
			t.Fatalf("a frame with bit %d flipped was accepted", i)
		}
	}
	_, got, err := in.Open(f)
	m.Seq = 1
	if err != nil || got != m {
		t.Fatalf("open = %v, %v; want %v", got, err, m)
	}
	if _, _, err := in.Open(f); !errors.Is(err, ErrReplayed) {
		t.Fatalf("the same frame again: %v, want ErrReplayed", err)
	}
	_, other := testConn(testGroup, 7) // another connection of the same group
	other.Key = in.Key
	if _, _, err := other.Open(f); !errors.Is(err, ErrStale) {
		t.Fatalf("on another connection: %v, want ErrStale", err)
	}
	_, b := testConn(testGroup+1, 1) // same connection, another group
	if _, _, err := b.Open(f); !errors.Is(err, ErrOtherGroup) {
		t.Fatalf("in another group: %v, want ErrOtherGroup", err)
	}
}

// FuzzFrameDecode: the decoders of message and handshake frames never
// panic, whatever the bytes, and a message frame opens only if its MAC is
// right (a sealed frame re-seals to itself).
func FuzzFrameDecode(f *testing.F) {
	d, _ := testConn(testGroup, 1)
	for _, m := range []Message{
		{Type: Heartbeat, From: 2, To: 1, Leader: 2, LeaderEpoch: 1},
		{Type: Election, From: 2, To: 1, Candidate: 2, Hops: 1},
		{Type: StatusQuery, From: ObserverID, To: 1, Ref: 99},
		{Type: StatusReply, From: 2, To: 1, Ref: 99, TTL: time.Second},
		{Type: StatusReply, From: 2, To: 1, Ref: 99, TTL: time.Second, Leader: 2, LeaderEpoch: 3, Value: "10.0.0.7:8080"},
		{Type: StepDown, From: ObserverID, To: 1, Ref: 5, LeaderEpoch: 3, Candidate: 2, TTL: 10 * time.Second},
		{Type: StatusReply, Flags: FlagAccepted, From: 1, To: ObserverID, Ref: 5, Leader: 1, LeaderEpoch: 3},
		{Type: Resign, From: 1, To: 2, Leader: 1, LeaderEpoch: 3, Candidate: 2, TTL: 10 * time.Second},
	} {
		f.Add(d.Seal(byte(m.Type), m))
	}
	f.Add(d.Seal(KindKeepalive, Message{From: 2, To: 1}))
	for _, k := range []byte{KindHello, KindChallenge, KindProof, KindWelcome} {
		f.Add(EncodeHandshake(Header{Kind: k, Group: testGroup, From: 2, To: 1}, bytes.Repeat([]byte{k}, NonceLen)))
	}
	f.Add([]byte{0, 0, 0, 4, 3, 2, 1, 0})
	v3 := d.Seal(byte(Heartbeat), Message{Type: Heartbeat, From: 2, To: 1})
	v3[4] = FrameVersion - 1 // a member of the previous version
	f.Add(v3)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, k := range []byte{KindHello, KindChallenge, KindProof, KindWelcome} {
			if h, v, err := DecodeHandshake(b, testGroup, k); err == nil && (len(v) != NonceLen || h.Kind != k) {
				t.Fatalf("handshake frame %x decoded to %+v %x", b, h, v)
			}
		}
		_, in := testConn(testGroup, 1)
		kind, m, err := in.Open(b)
		if err != nil {
			return
		}
		re, _ := testConn(testGroup, 1)
		if kind == KindKeepalive {
			m = Message{From: 2, To: 1}
		}
		m.Seq = 0
		if got := re.Seal(kind, m); !bytes.Equal(got, b) {
			t.Fatalf("accepted frame %x re-seals to %x", b, got)
		}
	})
}

// TestFrameValue: only a StatusReply carries a value, of at most
// MaxValueLen bytes of UTF-8; anything else is refused as malformed even
// with a valid MAC.
func TestFrameValue(t *testing.T) {
	for _, c := range []struct {
		m    Message
		kind byte
		ok   bool
	}{
		{Message{Type: StatusReply, Value: strings.Repeat("v", MaxValueLen)}, byte(StatusReply), true},
		{Message{Type: StatusReply, Value: strings.Repeat("v", MaxValueLen+1)}, byte(StatusReply), false},
		{Message{Type: StatusReply, Value: "\xff"}, byte(StatusReply), false},
		{Message{Type: Heartbeat, Value: "v"}, byte(Heartbeat), false},
		{Message{Type: StatusQuery, Value: "v"}, byte(StatusQuery), false},
		{Message{Value: "v"}, KindKeepalive, false},
	} {
		out, in := testConn(testGroup, 1)
		c.m.From, c.m.To = 2, 1
		_, got, err := in.Open(out.Seal(c.kind, c.m))
		switch {
		case c.ok && (err != nil || got.Value != c.m.Value):
			t.Errorf("%s with a %d-byte value: %v, value %d bytes", c.m.Type, len(c.m.Value), err, len(got.Value))
		case !c.ok && !errors.Is(err, ErrMalformed):
			t.Errorf("kind %#x with value %.12q: %v, want ErrMalformed", c.kind, c.m.Value, err)
		}
	}
}

// TestFrameOtherVersion: a frame of another protocol version, handshake
// or message, is refused with ErrVersion naming both versions.
func TestFrameOtherVersion(t *testing.T) {
	out, in := testConn(testGroup, 1)
	f := out.Seal(byte(Heartbeat), Message{Type: Heartbeat, From: 2, To: 1})
	hello := EncodeHandshake(Header{Kind: KindHello, Group: testGroup, From: 2, To: 1}, make([]byte, NonceLen))
	f[4], hello[4] = 3, 3 // an older member's frames
	_, _, err := in.Open(f)
	_, _, herr := DecodeHandshake(hello, testGroup, KindHello)
	for _, e := range []error{err, herr} {
		if want := fmt.Sprintf("version 3, this end speaks version %d", FrameVersion); !errors.Is(e, ErrVersion) || !strings.Contains(e.Error(), want) {
			t.Errorf("a version-3 frame: %v, want ErrVersion saying %q", e, want)
		}
	}
}

// TestFrameTimings: a step-down request carries its window, and a Resign
// the window it asks the members to hold back for; the election types
// carry none, and a frame with timings there is refused as malformed even
// with a valid MAC.
func TestFrameTimings(t *testing.T) {
	for _, c := range []struct {
		typ Type
		ok  bool
	}{{StepDown, true}, {Resign, true}, {StatusQuery, true}, {Heartbeat, false}, {Yield, false}, {Election, false}} {
		out, in := testConn(testGroup, 1)
		m := Message{Type: c.typ, From: 2, To: 1, LeaderEpoch: 4, Candidate: 3, TTL: 10 * time.Second}
		_, got, err := in.Open(out.Seal(byte(c.typ), m))
		switch {
		case c.ok && (err != nil || got.TTL != m.TTL || got.Candidate != 3):
			t.Errorf("%s with a window: %v, %+v", c.typ, err, got)
		case !c.ok && !errors.Is(err, ErrMalformed):
			t.Errorf("%s with a window: %v, want ErrMalformed", c.typ, err)
		}
	}
	if !StepDown.IsRequest() || StepDown.IsStatus() || !StatusQuery.IsRequest() || StatusReply.IsRequest() {
		t.Error("StepDown and StatusQuery are the requests; StatusReply is not")
	}
}

// TestFramePriorities: a message frame carries the sender's priority and,
// in a ring Election, the candidate's; a candidate priority on any other
// type is malformed.
func TestFramePriorities(t *testing.T) {
	out, in := testConn(testGroup, 3)
	m := Message{Type: Election, From: 1, To: 2, Candidate: 4, Priority: 1000, CandidatePriority: 7}
	_, got, err := in.Open(out.Seal(byte(m.Type), m))
	if m.Seq = 1; err != nil || got != m {
		t.Fatalf("open = %+v, %v; want %+v", got, err, m)
	}
	bad := Message{Type: Heartbeat, From: 1, To: 2, CandidatePriority: 7}
	if _, _, err := in.Open(out.Seal(byte(bad.Type), bad)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a heartbeat with a candidate priority: %v, want ErrMalformed", err)
	}
}
