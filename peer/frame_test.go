package peer_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/tenurehq/tenure/peer"
)

func testKey(t testing.TB) peer.Secret {
	s, err := peer.NewSecret([]byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFrameRoundTrip(t *testing.T) {
	s := testKey(t)
	m := peer.Message{Type: peer.Elected, Flags: peer.FlagAbstain, From: 3, To: 1, Incarnation: 1 << 60, Seq: 42,
		Epoch: 9, Leader: 3, LeaderEpoch: 9, Candidate: 3, Ref: 7, Hops: 2}
	f := peer.Encode(s, m)
	if len(f) != peer.FrameLen {
		t.Fatalf("frame is %d bytes, want %d", len(f), peer.FrameLen)
	}
	got, err := peer.Decode(s, f)
	if err != nil || got != m {
		t.Fatalf("Decode = %v, %v; want %v", got, err, m)
	}
	// Any flipped bit fails authentication (or, in the length prefix, the
	// size check).
	for i := range len(f) * 8 {
		g := bytes.Clone(f)
		g[i/8] ^= 1 << (i % 8)
		if _, err := peer.Decode(s, g); err == nil {
			t.Fatalf("a frame with bit %d flipped was accepted", i)
		}
	}
	other, _ := peer.NewSecret(bytes.Repeat([]byte{'k'}, 32))
	if _, err := peer.Decode(other, f); !errors.Is(err, peer.ErrBadMAC) {
		t.Fatalf("Decode under another secret = %v, want ErrBadMAC", err)
	}
}

// FuzzDecode: Decode never panics, and accepts only frames whose MAC is the
// HMAC of the rest under the secret; an accepted frame re-encodes to itself.
func FuzzDecode(f *testing.F) {
	s := testKey(f)
	f.Add(peer.Encode(s, peer.Message{Type: peer.Heartbeat, From: 1, To: 2, Seq: 1}))
	f.Add(peer.Encode(s, peer.Message{Type: peer.Election, From: 2, To: 3, Candidate: 2, Hops: 1}))
	f.Add(peer.Encode(s, peer.Message{Type: peer.StatusQuery, From: peer.ObserverID, To: 2, Seq: 1, Ref: 99}))
	f.Add(peer.Encode(s, peer.Message{Type: peer.StatusReply, From: 2, To: peer.ObserverID, Seq: 1, Ref: 99,
		Leader: 3, LeaderEpoch: 8, Epoch: 8, TTL: time.Second, Remaining: 300 * time.Millisecond}))
	f.Add([]byte{0, 0, 0, 4, 1, 2, 3, 4})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := peer.Decode(s, b)
		if err != nil {
			return
		}
		if len(b) < peer.MACLen || !s.Verify(b[:len(b)-peer.MACLen], b[len(b)-peer.MACLen:]) {
			t.Fatalf("accepted a frame with a bad MAC: %x", b)
		}
		if re := peer.Encode(s, m); !bytes.Equal(re, b) {
			t.Fatalf("accepted frame %x re-encodes to %x", b, re)
		}
	})
}

// TestStatusFrames: status messages travel in version-2 frames that round
// trip with their extra fields; every other type stays in version 1; a
// type in the other version's frame is refused even when signed.
func TestStatusFrames(t *testing.T) {
	s := testKey(t)
	q := peer.Message{Type: peer.StatusQuery, From: peer.ObserverID, To: 3, Incarnation: 5, Seq: 9, Ref: 1234}
	r := peer.Message{Type: peer.StatusReply, From: 3, To: peer.ObserverID, Incarnation: 6, Seq: 1, Ref: 1234,
		Epoch: 12, Leader: 2, LeaderEpoch: 11, TTL: 500 * time.Millisecond, Remaining: 120 * time.Millisecond}
	for _, m := range []peer.Message{q, r} {
		f := peer.Encode(s, m)
		if len(f) != peer.StatusFrameLen || f[4] != peer.StatusFrameVersion {
			t.Fatalf("%s: frame of %d bytes, version %d; want %d bytes, version %d", m.Type, len(f), f[4], peer.StatusFrameLen, peer.StatusFrameVersion)
		}
		got, err := peer.Decode(s, f)
		if err != nil || got != m {
			t.Fatalf("Decode = %v, %v; want %v", got, err, m)
		}
	}
	if f := peer.Encode(s, peer.Message{Type: peer.Heartbeat, From: 1, To: 2, TTL: time.Second}); len(f) != peer.FrameLen || f[4] != peer.FrameVersion {
		t.Fatalf("a heartbeat took a %d-byte version-%d frame", len(f), f[4])
	}
	// Re-sign a frame after changing its version or type: still refused.
	resign := func(f []byte, edit func([]byte) []byte) []byte {
		b := edit(bytes.Clone(f[:len(f)-peer.MACLen]))
		binary.BigEndian.PutUint32(b, uint32(len(b)+peer.MACLen-4))
		return append(b, s.Sign(b)...)
	}
	for name, f := range map[string][]byte{
		"query in a v1 frame": resign(peer.Encode(s, q), func(b []byte) []byte { b[4] = peer.FrameVersion; return b[:88] }),
		"heartbeat in a v2 frame": resign(peer.Encode(s, peer.Message{Type: peer.Heartbeat, From: 1, To: 2}),
			func(b []byte) []byte { b[4] = peer.StatusFrameVersion; return append(b, make([]byte, 16)...) }),
		"query to 0":   resign(peer.Encode(s, q), func(b []byte) []byte { binary.BigEndian.PutUint64(b[16:], 0); return b }),
		"reply from 0": resign(peer.Encode(s, r), func(b []byte) []byte { binary.BigEndian.PutUint64(b[8:], 0); return b }),
		"heartbeat from 0": resign(peer.Encode(s, peer.Message{Type: peer.Heartbeat, From: 1, To: 2}),
			func(b []byte) []byte { binary.BigEndian.PutUint64(b[8:], 0); return b }),
		"version 3": resign(peer.Encode(s, q), func(b []byte) []byte { b[4] = 3; return b }),
	} {
		if m, err := peer.Decode(s, f); !errors.Is(err, peer.ErrMalformed) {
			t.Errorf("%s: Decode = %v, %v; want ErrMalformed", name, m, err)
		}
	}
}
