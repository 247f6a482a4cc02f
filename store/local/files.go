//go:build linux

package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

// maxEscaped is the longest escaped key used as a file name as is; longer
// ones are replaced by a hash, keeping every name well under NAME_MAX (255)
// once the suffixes (".holder.<20 digits>", ".state.tmp.<16 hex>") are
// added.
const maxEscaped = 160

// keyFiles names the files of one key. All names are relative to the state
// directory (or, for term, to its .terms directory): every file is opened
// relative to a directory descriptor, never by path.
type keyFiles struct {
	key   string
	base  string // file name prefix shared by the key's files
	state string // the record
	lock  string // the mutation lock
	term  string // the term high-water record, in .terms
}

// baseName returns the file name prefix of key: "k-" and the key with every
// byte outside [A-Za-z0-9._-] written as %XX, or, if that is longer than
// maxEscaped, "h-" and the first 128 bits of the key's SHA-256 in hex. The
// prefixes keep the two forms apart.
func baseName(key string) string {
	var b strings.Builder
	b.WriteString("k-")
	for i := 0; i < len(key); i++ {
		c := key[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	if b.Len() > maxEscaped {
		sum := sha256.Sum256([]byte(key))
		return "h-" + hex.EncodeToString(sum[:16])
	}
	return b.String()
}

func (s *Store) files(key string) keyFiles {
	base := baseName(key)
	return keyFiles{key: key, base: base, state: base + ".state", lock: base + ".lock", term: base + ".term"}
}

// holder returns the name of the liveness file of term.
func holderName(kf keyFiles, term uint64) string {
	return kf.base + ".holder." + strconv.FormatUint(term, 10)
}

// isHolderName reports whether name is the liveness file of some term of
// the key with file prefix base.
func isHolderName(name, base string) bool {
	rest, ok := strings.CutPrefix(name, base+".holder.")
	if !ok || rest == "" {
		return false
	}
	for _, c := range []byte(rest) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// dirHandle is an open directory in which files are opened by name only,
// so that renaming or replacing the directory's path (or any of its
// parents) after Open changes nothing.
type dirHandle struct {
	f     *os.File     // opened O_RDONLY|O_DIRECTORY, never through a symlink
	path  string       // for messages
	group bool         // shared with its group: files 0660, owner any member
	gid   uint32       // the directory's group
	euid  uint32       // the user the directory was opened as, who must own its files
	id    fileID       // the directory's, as opened
	recs  *recordCache // the state directory's: records this handle wrote; nil for others
}

func (d *dirHandle) fd() int { return int(d.f.Fd()) }

// pathOf returns the path of name in d, for messages.
func (d *dirHandle) pathOf(name string) string { return filepath.Join(d.path, name) }

// fileMode is the mode of the files tenure creates in d.
func (d *dirHandle) fileMode() uint32 {
	if d.group {
		return 0o660
	}
	return 0o600
}

// rawFile is a file of a state directory opened for one short call: a
// record read, a liveness probe, a mutation lock, a record written. It is a
// bare descriptor, not an *os.File: regular files cannot be polled, and
// os.NewFile's attempt to register one with the runtime's poller costs two
// system calls per open, which every watcher's re-read and every renewal
// would pay. It is used by one goroutine and closed by it.
type rawFile struct {
	fd   int
	name string      // its path, for messages
	st   unix.Stat_t // as checked when it was opened
}

// Close closes the descriptor.
func (f rawFile) Close() { unix.Close(f.fd) }

// openRaw opens name in d with flags (O_RDONLY, O_RDWR, and O_CREAT or
// O_EXCL as needed; O_NOFOLLOW, O_NONBLOCK and O_CLOEXEC are always
// added). It never follows a symbolic link and never blocks on a FIFO or
// device, and it returns an error wrapping [ErrUnsafe] for anything but a
// regular file of the right owner and mode (see checkFile). A file that
// does not exist gives an error matching fs.ErrNotExist.
func (d *dirHandle) openRaw(name string, flags int) (rawFile, error) {
	fd, err := unix.Openat(d.fd(), name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, d.fileMode())
	for err == unix.EINTR {
		fd, err = unix.Openat(d.fd(), name, flags|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, d.fileMode())
	}
	if err == unix.ELOOP {
		return rawFile{fd: -1}, fmt.Errorf("%w: %s is a symbolic link; tenure never follows links in its state directory: remove it", ErrUnsafe, d.pathOf(name))
	}
	if err != nil {
		return rawFile{fd: -1}, &os.PathError{Op: "open", Path: d.pathOf(name), Err: err}
	}
	f := rawFile{fd: fd, name: d.pathOf(name)}
	if f.st, err = d.checkFile(fd, f.name); err != nil {
		f.Close()
		return rawFile{fd: -1}, err
	}
	return f, nil
}

// checkFile checks fd, an open file of d named name, and returns its
// status: it must be a regular file; in a private directory owned by the
// user who opened d, in a group-shared one owned by the directory's group;
// and accessible by nobody else. A file of this user whose mode is wrong
// (created under another umask, or by an older tenure with mode 0666 less
// the umask) is set to d's file mode; one of another user that is too
// open is an error.
func (d *dirHandle) checkFile(fd int, name string) (unix.Stat_t, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return st, fmt.Errorf("local: stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return st, fmt.Errorf("%w: %s is %s, not a regular file; tenure creates only regular files there: remove it", ErrUnsafe, name, kindOf(st.Mode))
	}
	switch {
	case !d.group && st.Uid != d.euid:
		return st, fmt.Errorf("%w: %s is owned by uid %d, not by this user (uid %d): remove it", ErrUnsafe, name, st.Uid, d.euid)
	case d.group && st.Gid != d.gid:
		return st, fmt.Errorf("%w: %s belongs to group %d, not to the shared directory's group %d: run chgrp %d %s", ErrUnsafe, name, st.Gid, d.gid, d.gid, name)
	}
	want := d.fileMode()
	if perm := st.Mode & 0o7777; perm != want {
		if st.Uid != d.euid {
			if perm&^want != 0 {
				return st, fmt.Errorf("%w: %s has mode %04o, more open than %04o: run chmod %o %s", ErrUnsafe, name, perm, want, want, name)
			}
			return st, nil
		}
		if err := unix.Fchmod(fd, want); err != nil {
			return st, fmt.Errorf("local: chmod %o %s: %w", want, name, err)
		}
	}
	return st, nil
}

// kindOf names the file type in mode, for messages.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return "not a regular file"
}

// fileID identifies a file: its device and inode.
type fileID struct{ dev, ino uint64 }

// idOf returns the identity of the file st describes.
func idOf(st *unix.Stat_t) fileID { return fileID{uint64(st.Dev), uint64(st.Ino)} }

// isFile reports whether name in d is, right now, the file id.
func (d *dirHandle) isFile(name string, id fileID) (bool, error) {
	var b unix.Stat_t
	err := unix.Fstatat(d.fd(), name, &b, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("local: stat %s: %w", d.pathOf(name), err)
	}
	return idOf(&b) == id, nil
}

// remove unlinks name in d; a missing file is not an error.
func (d *dirHandle) remove(name string) error {
	if err := unix.Unlinkat(d.fd(), name, 0); err != nil && err != unix.ENOENT {
		return fmt.Errorf("local: remove %s: %w", d.pathOf(name), err)
	}
	return nil
}

// ofdLock applies an open-file-description lock on the whole of fd with
// F_OFD_SETLK (typ F_WRLCK or F_UNLCK), retrying on EINTR. Unlike flock,
// a write lock needs a descriptor open for writing (EBADF otherwise), and
// the lock belongs to the open file description, so a child process that
// inherits the descriptor shares it. A lock held by another description
// gives EAGAIN (or EACCES).
func ofdLock(fd uintptr, typ int16) error {
	lk := unix.Flock_t{Type: typ, Whence: io.SeekStart}
	for {
		err := unix.FcntlFlock(fd, unix.F_OFD_SETLK, &lk)
		if err != unix.EINTR {
			return err
		}
	}
}

// ofdWriteLocked reports whether some open file description other than
// fd's holds a write lock on the file. Only a write lock counts, so a reader's read
// lock can neither fake nor hide a holder.
func ofdWriteLocked(fd uintptr) (bool, error) {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: io.SeekStart}
	for {
		err := unix.FcntlFlock(fd, unix.F_OFD_GETLK, &lk)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, err
		}
		return lk.Type != unix.F_UNLCK, nil
	}
}

// busy reports whether err says a lock is held by someone else.
func busy(err error) bool { return err == unix.EAGAIN || err == unix.EACCES }

// Mutation lock polling: F_OFD_SETLKW cannot be bounded by a context, so a
// busy lock is retried with sleeps growing from lockPollMin to lockPollMax
// until ctx is done.
const (
	lockPollMin = 100 * time.Microsecond
	lockPollMax = 5 * time.Millisecond
)

// lockKey takes the mutation lock of a key: an OFD write lock on its lock
// file, held by the returned file until it is closed. It polls until ctx is
// done. If the lock file is removed or replaced while it waits or right
// after it locked it, it starts over on the new file, so two callers never
// both believe they hold the lock of one key.
func (s *Store) lockKey(ctx context.Context, name string) (rawFile, error) {
	wait := lockPollMin
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		f, err := s.d.openRaw(name, unix.O_RDWR|unix.O_CREAT)
		if err != nil {
			return f, fmt.Errorf("local: open lock file: %w", err)
		}
		err = ofdLock(uintptr(f.fd), unix.F_WRLCK)
		if err == nil {
			same, serr := s.d.isFile(name, idOf(&f.st))
			if serr != nil {
				f.Close()
				return rawFile{fd: -1}, serr
			}
			if same {
				return f, nil
			}
			f.Close() // replaced meanwhile: lock the file now in place
			continue
		}
		f.Close()
		if !busy(err) {
			return rawFile{fd: -1}, fmt.Errorf("local: lock %s: %w", s.d.pathOf(name), err)
		}
		if t == nil {
			t = time.NewTimer(wait)
		} else {
			t.Reset(wait)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return rawFile{fd: -1}, fmt.Errorf("local: waiting for the lock of %s: %w", s.d.pathOf(name), context.Cause(ctx))
		}
		wait = min(wait*2, lockPollMax)
	}
}

// maxStateFile bounds the size of a state or term file a reader accepts;
// a larger file is an error, never read to the end.
const maxStateFile = headerLen + maxBody + trailerLen

// readState reads the record name in d; ok is false if it does not exist.
// A file that is not a regular file of the right owner, or larger than
// maxStateFile, or that does not decode, is an error wrapping ErrCorrupt
// or ErrUnsafe that names it. Reading never blocks: FIFOs and devices are
// refused before any read.
func readState(d *dirHandle, name string) (st state, ok bool, err error) {
	return readStateFile(d, name, false)
}

// readRecord reads a key's record (NAME.state) as readState does, except
// that an empty file reads as none, as if deleted: a renewal's record is
// swapped into place without being written out (see swapped), so after a
// power loss it may be empty, and the key's .terms record, never written
// so, still holds its term. An empty .terms record remains an error.
func readRecord(d *dirHandle, name string) (st state, ok bool, err error) {
	return readStateFile(d, name, true)
}

// readStateFile is readState, and with emptyIsNone readRecord.
func readStateFile(d *dirHandle, name string, emptyIsNone bool) (st state, ok bool, err error) {
	f, err := d.openRaw(name, unix.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return state{}, false, nil
	}
	if err != nil {
		return state{}, false, fmt.Errorf("local: read state: %w", err)
	}
	defer f.Close()
	if f.st.Size == 0 && emptyIsNone {
		return state{}, false, nil
	}
	if f.st.Size > int64(maxStateFile) {
		return state{}, false, fmt.Errorf("%w %s: larger than the limit of %d bytes", ErrCorrupt, f.name, maxStateFile)
	}
	data, err := f.readAll(int(f.st.Size))
	if err != nil {
		return state{}, false, fmt.Errorf("local: read state %s: %w", f.name, err)
	}
	if st, ok := d.recs.lookup(name, data); ok {
		return st, true, nil
	}
	st, err = decodeState(data)
	if err != nil {
		return state{}, false, fmt.Errorf("%w %s: %v", ErrCorrupt, f.name, err)
	}
	return st, true, nil
}

// readAll reads f, size bytes long when it was opened. Records are never
// written in place (a new file is renamed over the old one), so reading
// stops once size bytes came, without the read that would confirm the end.
// A file written in place meanwhile (by someone who can write the
// directory) is read up to size, and its record decodes only if its length
// and checksum hold; one that shrank ends early and does not decode.
func (f rawFile) readAll(size int) ([]byte, error) {
	data := make([]byte, size)
	n := 0
	for n < size {
		m, err := unix.Read(f.fd, data[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return data[:n], nil
}

// writeMode is how writeState puts a record in place.
type writeMode int

const (
	// renamed: renamed over the record, not fsynced. On ext4 such a rename
	// writes the new file out first (auto_da_alloc), so after a power loss
	// the name holds the old record or the new one.
	renamed writeMode = iota
	// durable: fsynced, with the directory, before writeState returns, so
	// the record survives a power loss.
	durable
	// swapped: for a record rewritten every few seconds (a renewal):
	// swapped into place and the old one removed (see swap), which
	// never starts a disk write. After a power loss the record may be
	// empty, which reads as no record (see readRecord); the key's .terms
	// record still holds its term.
	swapped
)

// writeState replaces the record name in d by writing a new temporary file
// in tmpDir (O_EXCL, a random name, so nothing in its place is ever
// followed or truncated) and putting it in the record's place as mode
// says, so readers see the old or the new record, never a mix. The state
// directory's records are written through a temporary file in .terms, so
// that a write shows in the state directory as one event (the rename),
// which is all its watchers, in every process, are woken for; if the
// rename fails with EXDEV (something is mounted on .terms) it writes in d
// instead. A temporary file left by a crash is never read and may be
// removed.
func writeState(d, tmpDir *dirHandle, name string, st state, mode writeMode) error {
	err := writeStateVia(d, tmpDir, name, st, mode)
	if errors.Is(err, unix.EXDEV) && tmpDir != d {
		err = writeStateVia(d, d, name, st, mode)
	}
	if err != nil {
		return fmt.Errorf("local: write state %s: %w", d.pathOf(name), err)
	}
	return nil
}

func writeStateVia(d, tmpDir *dirHandle, name string, st state, mode writeMode) error {
	// math/rand/v2's generator (ChaCha8, seeded by the runtime from the
	// system) makes names nobody can predict without a system call per
	// write; O_EXCL makes a name taken meanwhile an error, never shared.
	tmp := fmt.Sprintf("%s.tmp.%016x", name, rand.Uint64())
	f, err := tmpDir.openRaw(tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL)
	if err != nil {
		return err
	}
	data := encodeState(st)
	err = f.writeAll(data)
	if err == nil && mode == durable {
		err = unix.Fsync(f.fd)
	}
	if cerr := unix.Close(f.fd); err == nil {
		err = cerr
	}
	if err == nil && mode == swapped {
		err = swap(tmpDir, tmp, d, name)
	} else if err == nil {
		err = unix.Renameat(tmpDir.fd(), tmp, d.fd(), name)
	}
	if err != nil {
		_ = tmpDir.remove(tmp)
		d.recs.forget(name) // the rename may or may not have happened
		return err
	}
	d.recs.wrote(name, data, st)
	if mode == durable {
		if err := d.f.Sync(); err != nil {
			return fmt.Errorf("sync state directory %s: %w", d.path, err)
		}
	}
	return nil
}

// swap puts the file tmp in tmpDir in the place of name in d, at once for
// every reader, as rename(2) does: over an existing record it swaps the two
// files (RENAME_EXCHANGE) and then removes the old one under the temporary
// name. On ext4 a rename over an existing file makes the caller start
// writing the new file out (auto_da_alloc): about 40 % of an idle leader's
// CPU, for a record the next renewal replaces before the kernel's flusher
// would write it. Where the record does not exist yet, or the file system
// cannot swap, it renames.
func swap(tmpDir *dirHandle, tmp string, d *dirHandle, name string) error {
	err := unix.Renameat2(tmpDir.fd(), tmp, d.fd(), name, unix.RENAME_EXCHANGE)
	switch err {
	case nil:
		// tmp now names the old record; if it cannot be removed, it
		// is a temporary file like one left by a crash.
		if unix.Unlinkat(tmpDir.fd(), tmp, 0) == unix.EISDIR {
			// name was a directory, which rename refuses to replace:
			// put it back and refuse too.
			_ = unix.Renameat2(tmpDir.fd(), tmp, d.fd(), name, unix.RENAME_EXCHANGE)
			return unix.EISDIR
		}
		return nil
	case unix.ENOENT, unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP:
		return unix.Renameat(tmpDir.fd(), tmp, d.fd(), name)
	}
	return err
}

// writeAll writes data to f.
func (f rawFile) writeAll(data []byte) error {
	for len(data) > 0 {
		n, err := unix.Write(f.fd, data)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// boottime returns CLOCK_BOOTTIME in nanoseconds: monotonic, counting time
// suspended, and shared by every process of the host.
func boottime() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Only EINVAL for an unknown clock, which Linux ≥ 2.6.39 knows.
		panic("local: clock_gettime(CLOCK_BOOTTIME): " + err.Error())
	}
	return ts.Nano()
}

// bootIDFile identifies the current boot of the host.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

func readBootID() (string, error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return "", fmt.Errorf("local: read boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" || len(id) > 64 {
		return "", fmt.Errorf("local: unexpected boot id %q in %s", id, bootIDFile)
	}
	return id, nil
}

// holderState probes the liveness file name: exists is false if there is
// none, locked whether its holder (some process with it open for writing)
// still holds its write lock, i.e. whether the grant's holder is alive.
func (s *Store) holderState(name string) (locked, exists bool, err error) {
	f, err := s.d.openRaw(name, unix.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("local: probe holder: %w", err)
	}
	defer f.Close()
	locked, err = ofdWriteLocked(uintptr(f.fd))
	if err != nil {
		return false, true, fmt.Errorf("local: probe holder %s: %w", f.name, err)
	}
	return locked, true, nil
}

// live reports whether st is a live grant at now (CLOCK_BOOTTIME): held,
// unexpired, of this boot, and its holder alive. A grant made through this
// handle is alive while its liveness file is the one in the directory:
// the handle holds that file's lock for as long as it remembers the grant,
// so only the file's identity needs checking. Any other grant is alive
// while its liveness file is locked.
func (s *Store) live(kf keyFiles, st state, now int64) (bool, error) {
	_, live, err := s.liveUntil(kf, st, now)
	return live, err
}

// liveUntil is live, also returning until when the grant lives as of now
// (its record's expiry, or its session's): a grant of a session is live
// while its record names a holder, and its session file is present,
// locked, of this boot and unexpired at now, which the caller read before
// calling it (see readSession).
func (s *Store) liveUntil(kf keyFiles, st state, now int64) (int64, bool, error) {
	if st.Session == "" {
		live, err := s.livePlain(kf, st, now)
		return st.Expires, live, err
	}
	if st.Holder == "" || st.BootID != s.bootID {
		return 0, false, nil
	}
	v, err := s.readSession(st.Session)
	if err != nil || !v.liveAt(now) {
		return 0, false, err
	}
	return v.expires, true, nil
}

// livePlain is live for a grant of [Store.Acquire], with a liveness file.
func (s *Store) livePlain(kf keyFiles, st state, now int64) (bool, error) {
	if !s.unexpired(st, now) {
		return false, nil
	}
	name := holderName(kf, st.Term)
	if id, mine := s.grantFile(tenure.Lease{Key: kf.key, Identity: st.Holder, Term: st.Term, Token: st.Token}); mine {
		return s.d.isFile(name, id)
	}
	locked, _, err := s.holderState(name)
	return locked, err
}

// unexpired reports whether st names a holder whose grant, made during
// this boot, has not expired at now.
func (s *Store) unexpired(st state, now int64) bool {
	return st.Holder != "" && now < st.Expires && st.BootID == s.bootID
}

// createHolder creates and write-locks the liveness file of term, and
// returns it with its identity. Any file of that name is a leftover of an
// acquisition that crashed before writing its record, so it is replaced.
func (s *Store) createHolder(kf keyFiles, term uint64) (*os.File, fileID, error) {
	name := holderName(kf, term)
	if err := s.d.remove(name); err != nil {
		return nil, fileID{}, err
	}
	rf, err := s.d.openRaw(name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL)
	if err != nil {
		return nil, fileID{}, fmt.Errorf("local: create holder file: %w", err)
	}
	if err := ofdLock(uintptr(rf.fd), unix.F_WRLCK); err != nil {
		rf.Close()
		_ = s.d.remove(name)
		return nil, fileID{}, fmt.Errorf("local: lock holder file %s: %w", rf.name, err)
	}
	// An *os.File: the holder keeps it, and may pass it to a child process.
	return os.NewFile(uintptr(rf.fd), rf.name), idOf(&rf.st), nil
}
