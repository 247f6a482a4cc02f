//go:build linux

package local

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

// sessionsDir is the subdirectory of the state directory that holds the
// session files (see doc.go, Sessions).
const sessionsDir = ".sessions"

// Session file layout, fixed length, all integers big-endian. The holder
// rewrites it in place with one pwrite at offset 0, so it never changes
// size and its identity (and its OFD lock) stays the file's for its life.
//
//	offset  size  field
//	0       8     magic "tenure\x00S"
//	8       2     format version (1)
//	10      8     expiry, CLOCK_BOOTTIME nanoseconds of boot BOOT
//	18      8     TTL in nanoseconds
//	26      1     length n of BOOT (1..64)
//	27      64    BOOT, the boot id, then zeros
//	91      32    the session's id (32 lowercase hex digits), its file name
//	123     4     CRC-32C (Castagnoli) of bytes 0..122
const (
	sessionMagic   = "tenure\x00S"
	sessionVersion = 1
	sessionIDLen   = 32
	sessionFileLen = 127
	maxBootID      = 64
)

// sessionFile is the content of a session file.
type sessionFile struct {
	id      string // 32 lowercase hex digits, the file's name
	expires int64  // CLOCK_BOOTTIME of boot bootID, ns
	ttl     int64  // ns
	bootID  string
}

// encode returns the on-disk form of sf, which must be valid.
func (sf sessionFile) encode() []byte {
	buf := make([]byte, 0, sessionFileLen)
	buf = append(buf, sessionMagic...)
	buf = binary.BigEndian.AppendUint16(buf, sessionVersion)
	buf = binary.BigEndian.AppendUint64(buf, uint64(sf.expires))
	buf = binary.BigEndian.AppendUint64(buf, uint64(sf.ttl))
	buf = append(buf, byte(len(sf.bootID)))
	buf = append(buf, sf.bootID...)
	buf = append(buf, make([]byte, maxBootID-len(sf.bootID))...)
	buf = append(buf, sf.id...)
	return binary.BigEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// errSessionChecksum is decodeSession's error for a checksum mismatch,
// which a read racing an in-place rewrite can also see (see readSession).
var errSessionChecksum = errors.New("checksum mismatch")

// decodeSession parses data strictly. Its errors fit on one line and name
// neither the file nor ErrCorrupt; readSession adds both.
func decodeSession(data []byte) (sessionFile, error) {
	if len(data) != sessionFileLen {
		return sessionFile{}, fmt.Errorf("%d bytes, want %d", len(data), sessionFileLen)
	}
	if string(data[:8]) != sessionMagic {
		return sessionFile{}, fmt.Errorf("bad magic %q (not a tenure session file)", data[:8])
	}
	if v := binary.BigEndian.Uint16(data[8:]); v != sessionVersion {
		return sessionFile{}, fmt.Errorf("format version %d, this build reads version %d", v, sessionVersion)
	}
	if binary.BigEndian.Uint32(data[123:]) != crc32.Checksum(data[:123], castagnoli) {
		return sessionFile{}, errSessionChecksum
	}
	sf := sessionFile{
		expires: int64(binary.BigEndian.Uint64(data[10:])),
		ttl:     int64(binary.BigEndian.Uint64(data[18:])),
		id:      string(data[91:123]),
	}
	n := int(data[26])
	boot := data[27 : 27+maxBootID]
	switch {
	case sf.expires < 0 || sf.ttl <= 0:
		return sessionFile{}, errors.New("negative expiry or TTL not positive")
	case n == 0 || n > maxBootID || bytes.IndexByte(boot[:n], 0) >= 0 || !allZero(boot[n:]):
		return sessionFile{}, errors.New("bad boot id")
	case !validSessionID(sf.id):
		return sessionFile{}, errors.New("bad session id")
	}
	sf.bootID = string(boot[:n])
	return sf, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// sessionView is what a reader learns of a session from its file.
type sessionView struct {
	exists  bool  // the file is in .sessions
	locked  bool  // some open file description holds its write lock: the holder is alive
	expires int64 // when locked: its expiry on this boot's CLOCK_BOOTTIME; 0 if of another boot
}

// liveAt reports whether the session is live at now.
func (v sessionView) liveAt(now int64) bool { return v.locked && now < v.expires }

// sessionReadTries bounds the reads of a session file that fail their
// checksum: a read can race the holder's in-place rewrite and see part of
// each version (the kernel does not make a read of a page atomic with a
// write to it on every file system). A file that fails this often is
// corrupt.
const sessionReadTries = 4

// readSession reads the session file id. A link, FIFO, device, a file of
// another owner or a file that does not decode is an error wrapping
// ErrUnsafe or ErrCorrupt that names it; it never makes a session look
// live. Callers take their clock reading before calling it: an expiry read
// after a keep-alive's write is then judged against a time before it,
// which only that keep-alive's own check (see KeepAlive) can contradict.
func (s *Store) readSession(id string) (sessionView, error) {
	if !validSessionID(id) {
		return sessionView{}, fmt.Errorf("%w: a record names session %q, not a session id", ErrCorrupt, id)
	}
	sd, err := s.sessDir()
	if err != nil {
		return sessionView{}, err
	}
	f, err := sd.openRaw(id, unix.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return sessionView{}, nil
	}
	if err != nil {
		return sessionView{}, fmt.Errorf("local: read session: %w", err)
	}
	defer f.Close()
	// The lock first: once dropped it never comes back (nothing but the
	// holder opens the file for writing), so a session unlocked now is
	// over whatever the file says.
	locked, err := ofdWriteLocked(uintptr(f.fd))
	if err != nil {
		return sessionView{exists: true}, fmt.Errorf("local: probe session %s: %w", f.name, err)
	}
	if !locked {
		return sessionView{exists: true}, nil
	}
	var sf sessionFile
	buf := make([]byte, sessionFileLen+1)
	for try := 1; ; try++ {
		n, err := unix.Pread(f.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return sessionView{exists: true}, fmt.Errorf("local: read session %s: %w", f.name, err)
		}
		sf, err = decodeSession(buf[:n])
		if err == nil && sf.id != id {
			err = fmt.Errorf("it is session %s's file", sf.id)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, errSessionChecksum) || try == sessionReadTries {
			return sessionView{exists: true}, fmt.Errorf("%w %s: %v", ErrCorrupt, f.name, err)
		}
	}
	v := sessionView{exists: true, locked: true}
	if sf.bootID == s.bootID {
		v.expires = sf.expires
	}
	return v, nil
}

// sessDir returns the handle's .sessions directory after checking that it
// is still the one in the state directory; if .sessions was removed or
// replaced since, it opens the one now in place, so that every handle
// reads and writes session files in the same directory.
func (s *Store) sessDir() (*dirHandle, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, tenure.ErrClosed
	}
	return s.sessDirLocked()
}

// sessDirLocked is sessDir for a caller holding s.mu. A replaced
// directory's descriptor stays open until Close: a reader may still be
// using it.
func (s *Store) sessDirLocked() (*dirHandle, error) {
	var st unix.Stat_t
	err := unix.Fstatat(s.d.fd(), sessionsDir, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == nil && idOf(&st) == s.sd.id {
		return s.sd, nil
	}
	if err != nil && err != unix.ENOENT {
		return nil, fmt.Errorf("local: stat %s: %w", s.d.pathOf(sessionsDir), err)
	}
	nd, err := openDirAt(s.d, sessionsDir, s.d.group)
	if err != nil {
		return nil, err
	}
	s.sdOld = append(s.sdOld, s.sd)
	s.sd = nd
	return nd, nil
}

// recordStamp tells whether a record changed: a record replaced by rename
// is another inode, one overwritten in place has a new size or times.
type recordStamp struct {
	id           fileID
	size         int64
	mtime, ctime unix.Timespec
}

// stampOf returns the stamp of the record name in the state directory; ok
// is false if it does not exist.
func (s *Store) stampOf(name string) (recordStamp, bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(s.d.fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return recordStamp{}, false, nil
	}
	if err != nil {
		return recordStamp{}, false, fmt.Errorf("local: stat %s: %w", s.d.pathOf(name), err)
	}
	return recordStamp{id: idOf(&st), size: st.Size, mtime: st.Mtim, ctime: st.Ctim}, true, nil
}

// stampSettle is how far a record's change time must be from the clock
// for a stamp to tell any later write apart: file systems keep times at
// the kernel's coarse clock (a few milliseconds; 10 at HZ=100), so a
// write in place within that of the last one, of the same size, leaves
// the stamp as it was. A grant's record is read by KeepAlive until its
// stamp has settled: usually once, at the first KeepAlive after its
// Acquire.
const stampSettle = 100 * time.Millisecond

// settled reports whether stamp, of a record whose content was checked
// just before now, tells any later write apart.
func (st recordStamp) settled(now time.Time) bool {
	d := now.Sub(time.Unix(st.ctime.Unix()))
	return d > stampSettle || d < -stampSettle
}
