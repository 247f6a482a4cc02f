package peer_test

import (
	"bytes"
	"errors"
	"testing"

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
