package wire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

// Wire format, version 6. All integers are big-endian; every frame starts
// with the same 32-byte Header:
//
//	offset size field
//	0      4    length of the rest of the frame (frame size - 4)
//	4      1    version (6)
//	5      1    kind: a message [Type] (1-12) or a handshake kind (0x81-0x85)
//	6      1    flags
//	7      1    reserved, 0
//	8      8    group tag: SHA-256 of the group's description (see
//	            package peer/tcp), public, so a frame of another group is told apart
//	16     8    from
//	24     8    to
//
// Handshake frames (64 bytes) add one 32-byte field at offset 32: the
// sender's fresh random nonce in Hello and Challenge, an HMAC-SHA256 under
// the group key over the handshake transcript in Proof and Welcome (see
// package peer/tcp). Message frames (160 bytes plus the value's length,
// also the Keepalive) add
//
//	32     8    connection tag: the first 8 bytes of SHA-256(dialer nonce ||
//	            acceptor nonce), public
//	40     8    sequence number on this connection and direction: 1, 2, 3...
//	48     8    incarnation (random per process start; informational)
//	56     8    epoch
//	64     8    leader
//	72     8    leader epoch
//	80     8    candidate
//	88     8    ref
//	96     8    hops
//	104    8    ttl, nanoseconds (status replies; the window of a
//	            step-down request or of a resign after one)
//	112    8    remaining, nanoseconds (status replies)
//	120    4    priority: the sender's own (0: it never leads)
//	124    4    candidate priority: the priority of Candidate in a ring
//	            Election, 0 in every other frame
//	128    n    value: the coordinator's published value, UTF-8, at most
//	            MaxValueLen bytes; only in a StatusReply (n = 0 in every
//	            other frame). n is the frame's length minus 160.
//	128+n  32   HMAC-SHA256 over bytes 0 to 127+n under the direction's
//	            session key, derived from the group key and both nonces
//
// Version 6 added the priorities (each member announces its own in every
// frame it sends); version 5 added the step-down request ([StepDown], [FlagAccepted], a
// window on Resign); version 4 added the value. Members and observers of different versions
// do not interoperate: every frame of another version, the first
// handshake frame included, is refused with [ErrVersion] (its error names
// both versions), so a member or observer of another tenure version never
// gets past the handshake. Versions 1 and 2 had one MAC under the raw
// secret and replay state in memory; version 3 frames were 152 bytes, with
// no value, as were version 4 and 5 frames without one.
const (
	FrameVersion = 6
	// FrameLen is the size of a message frame without a value (a
	// StatusReply adds its value's length), HandshakeLen of a handshake
	// frame.
	FrameLen     = bodyLen + MACLen
	HandshakeLen = 64
	// MaxFrameLen bounds the length prefix a reader accepts; a larger one is
	// counted as oversized and the connection dropped.
	MaxFrameLen = 2048
	// MaxValueLen is the longest value a StatusReply carries, in bytes: a
	// published value's limit (tenure.MaxValueLen).
	MaxValueLen = 1024
	// MACLen is the size of an HMAC-SHA256 tag.
	MACLen = sha256.Size
	// NonceLen is the size of a handshake frame's field: a nonce or a MAC.
	NonceLen  = 32
	headerLen = 32
	bodyLen   = 128
	prioOff   = 120
)

// Handshake kinds, in the kind byte of handshake frames, and the
// keepalive's kind.
const (
	KindHello     = 0x81 // dialer -> acceptor: dialer nonce
	KindChallenge = 0x82 // acceptor -> dialer: acceptor nonce
	KindProof     = 0x83 // dialer -> acceptor: MAC proving the group key
	KindWelcome   = 0x84 // acceptor -> dialer: MAC proving the group key
	KindKeepalive = 0x85 // a message frame carrying nothing: keeps a link alive
)

// Frame decoding errors. Transports count them and drop the frame (and the
// connection).
var (
	ErrFrameTooLarge = errors.New("peer: frame larger than the limit")
	ErrMalformed     = errors.New("peer: malformed frame")
	ErrBadMAC        = errors.New("peer: frame authentication failed")
	// ErrOtherGroup: the frame's group tag is not this group's (another
	// key, member list or algorithm shares the secret).
	ErrOtherGroup = errors.New("peer: frame of another group")
	// ErrVersion: the frame's version is not [FrameVersion]: its sender
	// runs another tenure version. The error names both versions.
	ErrVersion = errors.New("peer: frame of another protocol version")
	// ErrStale: the frame's connection tag is not this connection's: it
	// was recorded on an earlier connection (before a restart) and
	// replayed.
	ErrStale = errors.New("peer: frame of another connection")
	// ErrReplayed: an authenticated frame whose sequence number is not the
	// next on its connection.
	ErrReplayed = errors.New("peer: frame replayed or out of order")
)

// FrameSize reads a frame's length prefix (the first 4 bytes) and returns the
// size of the whole frame, or [ErrFrameTooLarge] / [ErrMalformed] when a
// reader must not read that much.
func FrameSize(prefix []byte) (int, error) {
	if len(prefix) < 4 {
		return 0, fmt.Errorf("%w: %d bytes of length prefix", ErrMalformed, len(prefix))
	}
	n := binary.BigEndian.Uint32(prefix)
	if n > MaxFrameLen-4 {
		return 0, fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, n)
	}
	if n < 4 {
		return 0, fmt.Errorf("%w: length %d", ErrMalformed, n)
	}
	return int(n) + 4, nil
}

// Header is the common part of every frame.
type Header struct {
	Kind, Flags byte
	Group       uint64
	From, To    uint64
}

func putHeader(b []byte, h Header) {
	binary.BigEndian.PutUint32(b[0:], uint32(len(b)-4))
	b[4] = FrameVersion
	b[5] = h.Kind
	b[6] = h.Flags
	binary.BigEndian.PutUint64(b[8:], h.Group)
	binary.BigEndian.PutUint64(b[16:], h.From)
	binary.BigEndian.PutUint64(b[24:], h.To)
}

// parseHeader checks b's size, version and group tag and returns its
// Header. It never panics.
func parseHeader(b []byte, group uint64) (Header, error) {
	size, err := FrameSize(b)
	if err != nil {
		return Header{}, err
	}
	if size != len(b) || len(b) < headerLen {
		return Header{}, fmt.Errorf("%w: %d bytes (length prefix %d)", ErrMalformed, len(b), size)
	}
	if b[4] != FrameVersion {
		return Header{}, fmt.Errorf("%w: version %d, this end speaks version %d: every member and observer of a group must run the same tenure version", ErrVersion, b[4], FrameVersion)
	}
	h := Header{Kind: b[5], Flags: b[6], Group: binary.BigEndian.Uint64(b[8:]),
		From: binary.BigEndian.Uint64(b[16:]), To: binary.BigEndian.Uint64(b[24:])}
	if h.Group != group {
		return Header{}, ErrOtherGroup
	}
	if b[7] != 0 {
		return Header{}, fmt.Errorf("%w: reserved byte %d", ErrMalformed, b[7])
	}
	return h, nil
}

// EncodeHandshake returns a handshake frame carrying v (a nonce or a MAC).
func EncodeHandshake(h Header, v []byte) []byte {
	b := make([]byte, HandshakeLen)
	putHeader(b, h)
	copy(b[headerLen:], v)
	return b
}

// DecodeHandshake parses a handshake frame of the given kind and group and
// returns its Header and 32-byte field. It never panics.
func DecodeHandshake(b []byte, group uint64, kind byte) (Header, []byte, error) {
	h, err := parseHeader(b, group)
	if err != nil {
		return Header{}, nil, err
	}
	if len(b) != HandshakeLen || h.Kind != kind || h.Flags != 0 {
		return Header{}, nil, fmt.Errorf("%w: kind %#x of %d bytes (want handshake kind %#x, %d bytes)", ErrMalformed, h.Kind, len(b), kind, HandshakeLen)
	}
	return h, b[headerLen:], nil
}

// Direction is one direction of an authenticated connection: the session
// key, the group and connection tags and the sequence number. The
// handshake (package peer/tcp) derives Key and Conn; a Direction is used
// by one goroutine at a time (Seal and Open advance its sequence).
type Direction struct {
	Key   []byte
	Group uint64 // the group tag every frame carries
	Conn  uint64 // the connection tag every message frame carries
	seq   uint64 // last sequence number sent or received
}

// Seal encodes m as the next message frame of d (kind is m.Type, or
// KindKeepalive) and advances d's sequence number. It sets m.Seq. m.Value
// must be at most [MaxValueLen] bytes of UTF-8 and set only on a
// StatusReply; Open refuses the frame otherwise.
func (d *Direction) Seal(kind byte, m Message) []byte {
	d.seq++
	n := len(m.Value)
	b := make([]byte, FrameLen+n)
	putHeader(b, Header{Kind: kind, Flags: m.Flags, Group: d.Group, From: m.From, To: m.To})
	for i, v := range []uint64{d.Conn, d.seq, m.Incarnation, m.Epoch, m.Leader, m.LeaderEpoch, m.Candidate, m.Ref, m.Hops, uint64(m.TTL), uint64(m.Remaining)} {
		binary.BigEndian.PutUint64(b[headerLen+8*i:], v)
	}
	binary.BigEndian.PutUint32(b[prioOff:], m.Priority)
	binary.BigEndian.PutUint32(b[prioOff+4:], m.CandidatePriority)
	copy(b[bodyLen:], m.Value)
	mac := hmac.New(sha256.New, d.Key)
	mac.Write(b[:bodyLen+n])
	copy(b[bodyLen+n:], mac.Sum(nil))
	return b
}

// Open authenticates and parses one whole message frame of d (length
// prefix included) and advances d's sequence number. It checks, in order,
// the size and version ([ErrVersion]), the group tag ([ErrOtherGroup]),
// the connection tag ([ErrStale]), the MAC ([ErrBadMAC]), the sequence
// number ([ErrReplayed]) and the fields ([ErrMalformed]: a value outside a
// StatusReply or not UTF-8 too); no field is trusted before the MAC
// verified. The kind returned is the message type or KindKeepalive. It
// never panics, whatever b holds.
func (d *Direction) Open(b []byte) (byte, Message, error) {
	h, err := parseHeader(b, d.Group)
	if err != nil {
		return 0, Message{}, err
	}
	n := len(b) - FrameLen
	if n < 0 || n > MaxValueLen {
		return 0, Message{}, fmt.Errorf("%w: %d bytes (want %d to %d for a message frame)", ErrMalformed, len(b), FrameLen, FrameLen+MaxValueLen)
	}
	if binary.BigEndian.Uint64(b[headerLen:]) != d.Conn {
		return 0, Message{}, ErrStale
	}
	mac := hmac.New(sha256.New, d.Key)
	mac.Write(b[:bodyLen+n])
	if !hmac.Equal(mac.Sum(nil), b[bodyLen+n:]) {
		return 0, Message{}, ErrBadMAC
	}
	var f [11]uint64
	for i := range f {
		f[i] = binary.BigEndian.Uint64(b[headerLen+8*i:])
	}
	if f[1] != d.seq+1 {
		return 0, Message{}, fmt.Errorf("%w: sequence number %d after %d", ErrReplayed, f[1], d.seq)
	}
	d.seq++
	if h.Kind == KindKeepalive {
		if n != 0 {
			return 0, Message{}, fmt.Errorf("%w: a keepalive with a value", ErrMalformed)
		}
		return KindKeepalive, Message{}, nil
	}
	m := Message{Type: Type(h.Kind), Flags: h.Flags, From: h.From, To: h.To, Seq: f[1], Incarnation: f[2],
		Epoch: f[3], Leader: f[4], LeaderEpoch: f[5], Candidate: f[6], Ref: f[7], Hops: f[8],
		TTL: time.Duration(f[9]), Remaining: time.Duration(f[10]), Value: string(b[bodyLen : bodyLen+n]),
		Priority: binary.BigEndian.Uint32(b[prioOff:]), CandidatePriority: binary.BigEndian.Uint32(b[prioOff+4:])}
	switch {
	case m.Type != Election && m.CandidatePriority != 0:
		return 0, Message{}, fmt.Errorf("%w: %s with a candidate priority", ErrMalformed, m.Type)
	case !m.Type.Valid():
		return 0, Message{}, fmt.Errorf("%w: unknown message type %d", ErrMalformed, h.Kind)
	case !m.Type.HasTimings() && (m.TTL != 0 || m.Remaining != 0):
		return 0, Message{}, fmt.Errorf("%w: %s with status timings", ErrMalformed, m.Type)
	case m.Type != StatusReply && n != 0:
		return 0, Message{}, fmt.Errorf("%w: %s with a value", ErrMalformed, m.Type)
	case !utf8.ValidString(m.Value):
		return 0, Message{}, fmt.Errorf("%w: a value that is not UTF-8", ErrMalformed)
	}
	return h.Kind, m, nil
}

// ReadFrame reads one whole frame from r into buf (at least MaxFrameLen
// bytes) and returns it. It blocks until the frame is read or r fails;
// deadlines are the caller's.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	if _, err := io.ReadFull(r, buf[:4]); err != nil {
		return nil, err
	}
	size, err := FrameSize(buf[:4])
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(r, buf[4:size]); err != nil {
		return nil, err
	}
	return buf[:size], nil
}
