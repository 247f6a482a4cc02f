package peer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// EpochStore keeps a member's highest known coordinator epoch across
// restarts. Save must be durable when it returns; Load of a store never saved
// returns 0. Implementations are used from one goroutine at a time.
type EpochStore interface {
	Load() (uint64, error)
	Save(epoch uint64) error
}

// ErrCorrupt is wrapped by the error of loading an epoch file that is
// truncated, damaged or of an unknown version. A node never treats such a
// file as "epoch 0", since that could reuse fencing terms; an operator must
// look at it (and may delete it only if no term it issued is in use).
var ErrCorrupt = errors.New("peer: corrupt epoch file")

// Epoch file layout, big-endian: magic "tenure\x00P" (8 bytes), format
// version (2 bytes, 1), epoch (8 bytes), CRC-32C of the 18 bytes before (4).
const (
	epochMagic   = "tenure\x00P"
	epochVersion = 1
	epochFileLen = 8 + 2 + 8 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EpochFile is an [EpochStore] in a file named peer-<id>.epoch in a state
// directory. Save writes a temporary file, fsyncs it, renames it over the old
// one and fsyncs the directory, so a crash leaves either the old or the new
// epoch, never a torn one.
type EpochFile struct {
	dir, path string
}

// OpenEpochFile returns the epoch file of member id in dir, creating dir
// (mode 0700) if needed. On Unix dir must belong to the user and be
// closed to writes by group and others, and every directory above it
// belong to root or the user and be closed to writes by others unless
// sticky (else an error wrapping [tenure.ErrInvalid] naming it): whoever
// can write dir, or move it aside, can take the epoch back. It does not
// read the file; call Load.
func OpenEpochFile(dir string, id uint64) (*EpochFile, error) {
	if err := PrepareStateDir(dir); err != nil {
		return nil, err
	}
	return &EpochFile{dir: dir, path: filepath.Join(dir, "peer-"+strconv.FormatUint(id, 10)+".epoch")}, nil
}

// PrepareStateDir creates dir (mode 0700) if needed and checks it as
// [OpenEpochFile] does: on Unix dir must belong to the user and be closed
// to writes by group and others, and every directory above it belong to
// root or the user and, unless sticky, be closed to writes by others and
// by any group but the user's private group; else
// it returns an error wrapping [tenure.ErrInvalid] naming the directory
// and the fix. Modes that keep durable state of their own in a member's
// state directory (raft's term and vote) call it before opening it. It
// does not block beyond the file system calls.
func PrepareStateDir(dir string) error {
	if dir == "" {
		return invalidf("no state directory given (set state-dir)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("peer: creating the state directory: %w", err)
	}
	return checkStateDir(dir)
}

// Path is the file's path.
func (f *EpochFile) Path() string { return f.path }

// Load returns the saved epoch, 0 if the file does not exist, or an error
// wrapping [ErrCorrupt]. It never blocks: a symbolic link, FIFO, device or
// directory in the file's place is an error naming it (on Unix a link is
// never followed), and at most one byte more than an epoch file is read.
func (f *EpochFile) Load() (uint64, error) {
	r, err := os.OpenFile(f.path, os.O_RDONLY|epochOpenFlags, 0)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, nil
	case isLink(err):
		return 0, fmt.Errorf("%w: %s is a symbolic link, which is never followed: remove it", ErrCorrupt, f.path)
	case err != nil:
		return 0, fmt.Errorf("peer: reading the epoch file: %w", err)
	}
	defer r.Close()
	if fi, err := r.Stat(); err != nil {
		return 0, fmt.Errorf("peer: reading the epoch file: %w", err)
	} else if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%w: %s is not a regular file (%s): remove it", ErrCorrupt, f.path, fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(r, epochFileLen+1))
	if err != nil {
		return 0, fmt.Errorf("peer: reading the epoch file %s: %w", f.path, err)
	}
	return decodeEpoch(b, f.path)
}

func decodeEpoch(b []byte, path string) (uint64, error) {
	switch {
	case len(b) != epochFileLen:
		return 0, fmt.Errorf("%w: %s is %d bytes, want %d", ErrCorrupt, path, len(b), epochFileLen)
	case string(b[:8]) != epochMagic:
		return 0, fmt.Errorf("%w: %s has no epoch header", ErrCorrupt, path)
	case binary.BigEndian.Uint16(b[8:]) != epochVersion:
		return 0, fmt.Errorf("%w: %s has format version %d, want %d", ErrCorrupt, path, binary.BigEndian.Uint16(b[8:]), epochVersion)
	case crc32.Checksum(b[:18], castagnoli) != binary.BigEndian.Uint32(b[18:]):
		return 0, fmt.Errorf("%w: %s fails its checksum", ErrCorrupt, path)
	}
	return binary.BigEndian.Uint64(b[10:]), nil
}

func encodeEpoch(epoch uint64) []byte {
	b := make([]byte, epochFileLen)
	copy(b, epochMagic)
	binary.BigEndian.PutUint16(b[8:], epochVersion)
	binary.BigEndian.PutUint64(b[10:], epoch)
	binary.BigEndian.PutUint32(b[18:], crc32.Checksum(b[:18], castagnoli))
	return b
}

// Save durably replaces the saved epoch.
func (f *EpochFile) Save(epoch uint64) error {
	tmp, err := os.CreateTemp(f.dir, ".peer-epoch-*")
	if err != nil {
		return fmt.Errorf("peer: saving the epoch: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(encodeEpoch(epoch)); err != nil {
		tmp.Close()
		return fmt.Errorf("peer: saving the epoch: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("peer: saving the epoch: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("peer: saving the epoch: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return fmt.Errorf("peer: saving the epoch: %w", err)
	}
	d, err := os.Open(f.dir)
	if err != nil {
		return fmt.Errorf("peer: saving the epoch: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("peer: saving the epoch: syncing the directory: %w", err)
	}
	return nil
}

// MemEpoch is an in-memory [EpochStore] for tests and simulations: reuse one
// MemEpoch across a simulated restart of a node to model its disk. The zero
// value is ready to use and safe for concurrent use.
type MemEpoch struct {
	mu    sync.Mutex
	epoch uint64
	saves int
}

// Load implements [EpochStore].
func (m *MemEpoch) Load() (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch, nil
}

// Save implements [EpochStore].
func (m *MemEpoch) Save(epoch uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.epoch = epoch
	m.saves++
	return nil
}

// Saves returns how many times Save was called.
func (m *MemEpoch) Saves() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.saves
}
