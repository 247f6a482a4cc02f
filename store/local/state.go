package local

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/tenurehq/tenure"
)

// ErrCorrupt is wrapped by the error returned when a state file cannot be
// decoded: truncated, damaged, of an unknown version, or belonging to
// another key. The store never treats such a file as "never granted", since
// that would restart the key's terms at 1; an operator must look at it.
var ErrCorrupt = errors.New("local: corrupt state file")

// ErrUnsafe is wrapped by the error returned when the state directory or a
// file in it could let another user interfere: a directory owned by
// someone else or writable by group or others without [GroupShared], a
// symbolic link (in the directory, or planted by another user on the way
// to it), a FIFO, device or other non-regular file where tenure keeps a
// regular one, or a file too open or of the wrong owner. The store never
// works around such a file; the message names it and the fix.
var ErrUnsafe = errors.New("local: unsafe state directory")

// State file layout, all integers big-endian:
//
//	offset  size  field
//	0       8     magic "tenure\x00L"
//	8       2     format version (1)
//	10      4     length n of the JSON body
//	14      n     JSON body (see state)
//	14+n    4     CRC-32C (Castagnoli) of the JSON body
//
// Nothing may follow the checksum.
//
// The format version must change with anything an older build would
// misread, and not only with the record's fields: how a grant's liveness
// is judged (the kind of lock on NAME.holder.TERM and NAME.lock, the
// files' names, sessions) is part of it. Builds of one version refuse
// records of another as corrupt (the body also refuses unknown fields),
// which is safe; a change that keeps the version is not. That was how
// builds before 2026-11-22 (cd8f3c1), which locked with flock, and later
// ones, which use OFD locks, that flock does not see, both took a key
// the other held: they must never share a directory.
const (
	stateMagic   = "tenure\x00L"
	stateVersion = 1
	headerLen    = len(stateMagic) + 2 + 4
	trailerLen   = 4
	// maxBody bounds the body a decoder accepts; a real body is well under
	// 1 KiB (key and identity are at most 256 bytes each).
	maxBody = 16 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// state is the record of one key as stored on disk.
type state struct {
	// Key is the key the file belongs to, so that a file name shared by two
	// keys (a hash collision of long keys) is detected rather than mixed up.
	Key string `json:"key"`
	// Holder is the identity of the last grant's holder, or "" once it was
	// released. Whether that grant is live also depends on Expires, BootID
	// and the holder file (see Store).
	Holder string `json:"holder"`
	// Term is the term of the last grant; 0 never appears on disk.
	Term uint64 `json:"term"`
	// TTL of the last grant, in nanoseconds.
	TTL int64 `json:"ttl_ns"`
	// Expires is the grant's end on the CLOCK_BOOTTIME clock of boot BootID,
	// in nanoseconds. A grant of a session ends with the session, whose
	// file holds its expiry: here it is the session's expiry as of the
	// grant, never read to judge it.
	Expires int64 `json:"expires_ns"`
	// BootID identifies the boot whose clock Expires is measured on; a grant
	// of an earlier boot is dead.
	BootID string `json:"boot_id"`
	// Token identifies the grant (random, 128 bits as hex).
	Token string `json:"token"`
	// Value is the value published with the grant ([tenure.Claim.Value]);
	// "" once released. Absent from records written before values were
	// published, which decode as "".
	Value string `json:"value,omitempty"`
	// Session is the id of the session the grant was made in (see
	// doc.go, Sessions): the grant is live only while the session file
	// .sessions/SESSION is locked and unexpired, and has no liveness file
	// of its own. "" for a grant of [Store.Acquire] and once released.
	// Absent from other records, which older versions of tenure, which do
	// not know the field, therefore still read; a session record is
	// refused by them as corrupt, never taken for a free key.
	Session string `json:"session,omitempty"`
}

// encodeState returns the on-disk form of st.
func encodeState(st state) []byte {
	body, err := json.Marshal(st)
	if err != nil {
		// A struct of strings and integers always marshals.
		panic("local: marshal state: " + err.Error())
	}
	buf := make([]byte, 0, headerLen+len(body)+trailerLen)
	buf = append(buf, stateMagic...)
	buf = binary.BigEndian.AppendUint16(buf, stateVersion)
	buf = binary.BigEndian.AppendUint32(buf, uint32(len(body)))
	buf = append(buf, body...)
	buf = binary.BigEndian.AppendUint32(buf, crc32.Checksum(body, castagnoli))
	return buf
}

// decodeState parses data strictly. Its errors fit on one line and name
// neither the file nor ErrCorrupt; readState adds both.
func decodeState(data []byte) (state, error) {
	var st state
	if len(data) < headerLen+trailerLen {
		return st, fmt.Errorf("%d bytes, shorter than the smallest valid file", len(data))
	}
	if string(data[:len(stateMagic)]) != stateMagic {
		return st, fmt.Errorf("bad magic %q (not a tenure state file)", data[:len(stateMagic)])
	}
	if v := binary.BigEndian.Uint16(data[len(stateMagic):]); v != stateVersion {
		return st, fmt.Errorf("format version %d, this build reads version %d", v, stateVersion)
	}
	n := binary.BigEndian.Uint32(data[len(stateMagic)+2:])
	if n > maxBody {
		return st, fmt.Errorf("body length %d exceeds the limit of %d", n, maxBody)
	}
	if want := headerLen + int(n) + trailerLen; len(data) != want {
		return st, fmt.Errorf("%d bytes, want %d for a body of %d (truncated or trailing data)", len(data), want, n)
	}
	body := data[headerLen : headerLen+int(n)]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(data[headerLen+int(n):]); got != want {
		return st, fmt.Errorf("checksum %08x, want %08x", got, want)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		return state{}, fmt.Errorf("body: %s", oneLine(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return state{}, errors.New("data after the JSON body")
	}
	if err := st.validate(); err != nil {
		return state{}, errors.New("invalid record: " + oneLine(err))
	}
	return st, nil
}

// validate checks the invariants every written state satisfies.
func (st state) validate() error {
	if err := tenure.CheckKey(st.Key); err != nil {
		return err
	}
	switch {
	case st.Term == 0:
		return errors.New("term is 0")
	case st.TTL < 0 || st.Expires < 0:
		return errors.New("negative ttl_ns or expires_ns")
	case st.Holder != "" && (st.TTL == 0 || st.Token == "" || st.BootID == ""):
		return errors.New("held record without ttl, token or boot id")
	case len(st.Token) > 64 || len(st.BootID) > 64:
		return errors.New("over-long token or boot id")
	}
	if st.Holder == "" && st.Value != "" {
		return errors.New("free record with a value")
	}
	if st.Session != "" && (st.Holder == "" || !validSessionID(st.Session)) {
		return errors.New("session named by a free record, or not a session id")
	}
	if st.Holder != "" {
		return tenure.CheckClaim(st.Key, tenure.Claim{Identity: st.Holder, TTL: time.Duration(st.TTL), Value: st.Value})
	}
	return nil
}

// validSessionID reports whether id can be a session's id: 32 lowercase
// hex digits, so that a record naming a session can never name any other
// file.
func validSessionID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range []byte(id) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// oneLine flattens an error message onto one line.
func oneLine(err error) string {
	return string(bytes.ReplaceAll([]byte(err.Error()), []byte("\n"), []byte(" ")))
}
