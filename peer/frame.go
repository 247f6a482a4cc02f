package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Frame layouts, all integers big-endian. The MAC is HMAC-SHA256 under the
// group's shared secret over every byte before it, length prefix included.
//
// Version 1 carries the election messages (Heartbeat to Reject):
//
//	offset size field
//	0      4    length of the rest of the frame (FrameLen-4)
//	4      1    version (1)
//	5      1    message type
//	6      1    flags
//	7      1    reserved, 0
//	8      8    from
//	16     8    to
//	24     8    incarnation
//	32     8    sequence number
//	40     8    epoch
//	48     8    leader
//	56     8    leader epoch
//	64     8    candidate
//	72     8    ref
//	80     8    hops
//	88     32   HMAC-SHA256
//
// Version 2 carries only the observer's StatusQuery and StatusReply: the
// version-1 fields (from may be 0 in a query, to may be 0 in a reply), then
//
//	88     8    ttl, nanoseconds
//	96     8    remaining, nanoseconds
//	104    32   HMAC-SHA256
//
// Each type has exactly one version, so members that predate version 2
// still exchange version-1 frames with newer ones; they drop a status query
// as malformed (the observer reports them as not answering).
const (
	FrameVersion = 1
	// FrameLen is the size of a version-1 frame.
	FrameLen = bodyLen + MACLen
	// StatusFrameVersion is the version of StatusQuery and StatusReply
	// frames, and StatusFrameLen their size.
	StatusFrameVersion = 2
	StatusFrameLen     = statusBodyLen + MACLen
	// MaxFrameLen bounds the length prefix a reader accepts; a larger one is
	// counted as oversized and the connection dropped.
	MaxFrameLen   = 1024
	bodyLen       = 88
	statusBodyLen = 104
)

// Frame decoding errors. Transports count them and drop the frame.
var (
	ErrFrameTooLarge = errors.New("peer: frame larger than the limit")
	ErrMalformed     = errors.New("peer: malformed frame")
	ErrBadMAC        = errors.New("peer: frame authentication failed")
)

// Encode returns m as a signed frame.
// Status types take a version-2 frame, every other type a version-1 frame.
func Encode(s Secret, m Message) []byte {
	n, body, version := FrameLen, bodyLen, byte(FrameVersion)
	if m.Type.IsStatus() {
		n, body, version = StatusFrameLen, statusBodyLen, StatusFrameVersion
	}
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b[0:], uint32(n-4))
	b[4] = version
	b[5] = byte(m.Type)
	b[6] = m.Flags
	for i, v := range []uint64{m.From, m.To, m.Incarnation, m.Seq, m.Epoch, m.Leader, m.LeaderEpoch, m.Candidate, m.Ref, m.Hops} {
		binary.BigEndian.PutUint64(b[8+8*i:], v)
	}
	if version == StatusFrameVersion {
		binary.BigEndian.PutUint64(b[88:], uint64(m.TTL))
		binary.BigEndian.PutUint64(b[96:], uint64(m.Remaining))
	}
	copy(b[body:], s.Sign(b[:body]))
	return b
}

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

// Decode authenticates and parses one whole frame (length prefix included).
// The MAC is checked before any field is interpreted; a frame that does not
// verify under s returns an error matching [ErrBadMAC]. Decode never panics,
// whatever b holds.
func Decode(s Secret, b []byte) (Message, error) {
	size, err := FrameSize(b)
	if err != nil {
		return Message{}, err
	}
	if size != len(b) {
		return Message{}, fmt.Errorf("%w: length prefix says %d bytes, got %d", ErrMalformed, size, len(b))
	}
	if len(b) < MACLen+8 {
		return Message{}, fmt.Errorf("%w: %d bytes is too short", ErrMalformed, len(b))
	}
	body, mac := b[:len(b)-MACLen], b[len(b)-MACLen:]
	if !s.Verify(body, mac) {
		return Message{}, ErrBadMAC
	}
	want := FrameLen
	switch b[4] {
	case FrameVersion:
	case StatusFrameVersion:
		want = StatusFrameLen
	default:
		return Message{}, fmt.Errorf("%w: version %d (want %d or %d)", ErrMalformed, b[4], FrameVersion, StatusFrameVersion)
	}
	if len(b) != want {
		return Message{}, fmt.Errorf("%w: %d bytes (want %d for version %d)", ErrMalformed, len(b), want, b[4])
	}
	m := Message{Type: Type(b[5]), Flags: b[6]}
	if !m.Type.Valid() {
		return Message{}, fmt.Errorf("%w: unknown message type %d", ErrMalformed, b[5])
	}
	if m.Type.IsStatus() != (b[4] == StatusFrameVersion) {
		return Message{}, fmt.Errorf("%w: message type %s in a version-%d frame", ErrMalformed, m.Type, b[4])
	}
	if b[7] != 0 {
		return Message{}, fmt.Errorf("%w: reserved byte %d", ErrMalformed, b[7])
	}
	f := []*uint64{&m.From, &m.To, &m.Incarnation, &m.Seq, &m.Epoch, &m.Leader, &m.LeaderEpoch, &m.Candidate, &m.Ref, &m.Hops}
	for i, p := range f {
		*p = binary.BigEndian.Uint64(b[8+8*i:])
	}
	switch m.Type {
	case StatusQuery:
		// From may be ObserverID: observers are not members.
		if m.To == 0 {
			return Message{}, fmt.Errorf("%w: status query to 0", ErrMalformed)
		}
	case StatusReply:
		if m.From == 0 {
			return Message{}, fmt.Errorf("%w: status reply from 0", ErrMalformed)
		}
	default:
		if m.From == 0 || m.To == 0 {
			return Message{}, fmt.Errorf("%w: sender or receiver is 0", ErrMalformed)
		}
	}
	if m.Type.IsStatus() {
		m.TTL = time.Duration(binary.BigEndian.Uint64(b[88:]))
		m.Remaining = time.Duration(binary.BigEndian.Uint64(b[96:]))
	}
	return m, nil
}
