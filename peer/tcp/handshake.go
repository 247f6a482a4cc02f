package tcp

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// groupKey is what every member of one group shares: the key derived from
// the secret for this group, and the group's public tag.
type groupKey struct {
	key []byte
	tag uint64
}

// groupDescription names a group for key derivation: the key name, the
// algorithm and the sorted member IDs (not the addresses, which may be
// written differently on different hosts).
func groupDescription(key, algorithm string, g transport.Group) string {
	var b strings.Builder
	b.WriteString("key=" + strconv.Quote(key) + " algorithm=" + strconv.Quote(algorithm) + " members=")
	for i, id := range g.IDs() {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(id, 10))
	}
	return b.String()
}

// deriveGroupKey derives the group key with HKDF-SHA256 from the secret,
// over the group's description, so one secret file shared by two groups
// (or two keys) yields unrelated keys. The tag is a hash of the
// description alone: public, it only tells groups apart.
func deriveGroupKey(s Secret, key, algorithm string, g transport.Group) (groupKey, error) {
	if s.IsZero() {
		return groupKey{}, invalidf("no shared secret")
	}
	desc := groupDescription(key, algorithm, g)
	k, err := hkdf.Key(sha256.New, s.Bytes(), []byte("tenure/peer"), "tenure/peer/v3 group key\x00"+desc, 32)
	if err != nil {
		return groupKey{}, fmt.Errorf("peer: derive the group key: %w", err)
	}
	sum := sha256.Sum256([]byte("tenure/peer/v3 group tag\x00" + desc))
	return groupKey{key: k, tag: binary.BigEndian.Uint64(sum[:8])}, nil
}

// mac is HMAC-SHA256 under the group key of label and the transcript.
func (gk groupKey) mac(label string, transcript []byte) []byte {
	m := hmac.New(sha256.New, gk.key)
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write(transcript)
	return m.Sum(nil)
}

// session is an authenticated connection's state: who the other end is
// and the two directions.
type session struct {
	peer    uint64 // the other end's ID ([wire.ObserverID] for an observer)
	out, in wire.Direction
}

// newSession derives both directions from the handshake's transcript.
func newSession(gk groupKey, dialer, acceptor uint64, nd, na []byte, isDialer bool) *session {
	t := transcript(gk, dialer, acceptor, nd, na)
	h := sha256.Sum256(append(append([]byte(nil), nd...), na...))
	tag := binary.BigEndian.Uint64(h[:8])
	d2a := wire.Direction{Key: gk.mac("dialer to acceptor", t), Group: gk.tag, Conn: tag}
	a2d := wire.Direction{Key: gk.mac("acceptor to dialer", t), Group: gk.tag, Conn: tag}
	if isDialer {
		return &session{peer: acceptor, out: d2a, in: a2d}
	}
	return &session{peer: dialer, out: a2d, in: d2a}
}

func transcript(gk groupKey, dialer, acceptor uint64, nd, na []byte) []byte {
	t := make([]byte, 0, 24+2*wire.NonceLen)
	t = binary.BigEndian.AppendUint64(t, gk.tag)
	t = binary.BigEndian.AppendUint64(t, dialer)
	t = binary.BigEndian.AppendUint64(t, acceptor)
	return append(append(t, nd...), na...)
}

// errMisaddressed: a hello to another member, or from a sender that may
// not connect (itself, a non-member other than [wire.ObserverID]).
var errMisaddressed = errors.New("peer: connection for another member or from a non-member")

// dialHandshake authenticates a connection c that self dialled to member
// to (self is [wire.ObserverID] for an observer):
//
//	dialer   -> acceptor  Hello(nonce_d)
//	acceptor -> dialer    Challenge(nonce_a)
//	dialer   -> acceptor  Proof(HMAC(K, "proof", T))
//	acceptor -> dialer    Welcome(HMAC(K, "welcome", T))
//
// where K is the group key and T = group tag || dialer || acceptor ||
// nonce_d || nonce_a. Both nonces are fresh, so a recorded handshake or
// frame is worthless on any other connection. The acceptor reveals
// nothing derived from the secret before the dialer proved it knows K.
// It blocks until done or c's deadline (set by the caller).
func dialHandshake(c net.Conn, gk groupKey, self, to uint64) (*session, error) {
	s, welcome, err := dialProve(c, gk, self, to)
	if err != nil {
		return nil, err
	}
	if err := readWelcome(c, gk, welcome); err != nil {
		return nil, err
	}
	return s, nil
}

// dialProve runs the dialer's side of the handshake up to its proof and
// returns the session and the Welcome MAC to expect. A dialer that only
// sends (a member's outgoing link) may send frames at once, pipelined
// after its proof, and check the Welcome later ([readWelcome]): frames
// are worthless to an impostor, which could not replay them anywhere.
func dialProve(c net.Conn, gk groupKey, self, to uint64) (*session, []byte, error) {
	nd := make([]byte, wire.NonceLen)
	rand.Read(nd)
	if _, err := c.Write(wire.EncodeHandshake(wire.Header{Kind: wire.KindHello, Group: gk.tag, From: self, To: to}, nd)); err != nil {
		return nil, nil, err
	}
	b, err := wire.ReadFrame(c, make([]byte, wire.MaxFrameLen))
	if err != nil {
		return nil, nil, err
	}
	h, na, err := wire.DecodeHandshake(b, gk.tag, wire.KindChallenge)
	if err != nil {
		return nil, nil, err
	}
	if h.From != to || h.To != self {
		return nil, nil, errMisaddressed
	}
	na = append([]byte(nil), na...)
	t := transcript(gk, self, to, nd, na)
	if _, err := c.Write(wire.EncodeHandshake(wire.Header{Kind: wire.KindProof, Group: gk.tag, From: self, To: to}, gk.mac("proof", t))); err != nil {
		return nil, nil, err
	}
	return newSession(gk, self, to, nd, na, true), gk.mac("welcome", t), nil
}

// readWelcome reads the acceptor's Welcome from r and checks its MAC.
func readWelcome(r io.Reader, gk groupKey, want []byte) error {
	b, err := wire.ReadFrame(r, make([]byte, wire.MaxFrameLen))
	if err != nil {
		return err
	}
	if _, mac, err := wire.DecodeHandshake(b, gk.tag, wire.KindWelcome); err != nil {
		return err
	} else if !hmac.Equal(mac, want) {
		return wire.ErrBadMAC
	}
	return nil
}

// acceptHandshake is the acceptor's side of [dialHandshake] for member
// self; allow says which dialers may connect. It blocks until done or c's
// deadline (set by the caller).
func acceptHandshake(c net.Conn, gk groupKey, self uint64, allow func(from uint64) bool) (*session, error) {
	buf := make([]byte, wire.MaxFrameLen)
	b, err := wire.ReadFrame(c, buf)
	if err != nil {
		return nil, err
	}
	h, nd, err := wire.DecodeHandshake(b, gk.tag, wire.KindHello)
	if err != nil {
		return nil, err
	}
	if h.To != self || !allow(h.From) {
		return nil, errMisaddressed
	}
	nd = append([]byte(nil), nd...)
	na := make([]byte, wire.NonceLen)
	rand.Read(na)
	if _, err := c.Write(wire.EncodeHandshake(wire.Header{Kind: wire.KindChallenge, Group: gk.tag, From: self, To: h.From}, na)); err != nil {
		return nil, err
	}
	if b, err = wire.ReadFrame(c, buf); err != nil {
		return nil, err
	}
	t := transcript(gk, h.From, self, nd, na)
	p, mac, err := wire.DecodeHandshake(b, gk.tag, wire.KindProof)
	if err != nil {
		return nil, err
	}
	if p.From != h.From || p.To != self || !hmac.Equal(mac, gk.mac("proof", t)) {
		return nil, wire.ErrBadMAC
	}
	if _, err := c.Write(wire.EncodeHandshake(wire.Header{Kind: wire.KindWelcome, Group: gk.tag, From: self, To: h.From}, gk.mac("welcome", t))); err != nil {
		return nil, err
	}
	return newSession(gk, h.From, self, nd, na, false), nil
}
