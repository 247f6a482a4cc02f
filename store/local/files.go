//go:build linux

package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// maxEscaped is the longest escaped key used as a file name as is; longer
// ones are replaced by a hash, keeping every name well under NAME_MAX (255)
// once the suffixes (".holder.<20 digits>", ".state.tmp") are added.
const maxEscaped = 160

// keyFiles names the files of one key in the state directory.
type keyFiles struct {
	base  string // file name prefix shared by the key's files
	state string // path of the record
	tmp   string // path of the record being written (only under the lock)
	lock  string // path of the mutation lock
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
	p := filepath.Join(s.dir, base)
	return keyFiles{base: base, state: p + ".state", tmp: p + ".state.tmp", lock: p + ".lock"}
}

// holder returns the path of the liveness file of term.
func (s *Store) holder(kf keyFiles, term uint64) string {
	return filepath.Join(s.dir, kf.base+".holder."+strconv.FormatUint(term, 10))
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

// flock applies flock(2) to f, retrying on EINTR.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = unix.Flock(int(fd), how)
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// Mutation lock polling: flock has no timeout, so a busy lock is retried
// with sleeps growing from lockPollMin to lockPollMax until ctx is done.
const (
	lockPollMin = 100 * time.Microsecond
	lockPollMax = 5 * time.Millisecond
)

// lockKey takes the mutation lock of a key: an exclusive flock on its lock
// file, held by the returned file until it is closed. It polls until ctx is
// done.
func lockKey(ctx context.Context, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("local: open lock file: %w", err)
	}
	wait := lockPollMin
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		err := flock(f, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("local: lock %s: %w", path, err)
		}
		if t == nil {
			t = time.NewTimer(wait)
		} else {
			t.Reset(wait)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("local: waiting for the lock of %s: %w", path, context.Cause(ctx))
		}
		wait = min(wait*2, lockPollMax)
	}
}

// readState reads a key's record; ok is false if it was never written.
func readState(path string) (st state, ok bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return state{}, false, nil
	}
	if err != nil {
		return state{}, false, fmt.Errorf("local: read state: %w", err)
	}
	st, err = decodeState(data)
	if err != nil {
		return state{}, false, fmt.Errorf("%w %s: %v", ErrCorrupt, path, err)
	}
	return st, true, nil
}

// writeState replaces a key's record by writing its temporary file and
// renaming it over the record, so readers see the old or the new record,
// never a mix. With durable, the file and the directory are fsynced before
// it returns, so the record survives a power loss. The caller holds the
// mutation lock, which makes the fixed temporary name safe; a temporary
// file left by a crash is simply overwritten.
func (s *Store) writeState(kf keyFiles, st state, durable bool) error {
	data := encodeState(st)
	f, err := os.OpenFile(kf.tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return fmt.Errorf("local: write state: %w", err)
	}
	_, err = f.Write(data)
	if err == nil && durable {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("local: write state: %w", err)
	}
	if err := os.Rename(kf.tmp, kf.state); err != nil {
		return fmt.Errorf("local: write state: %w", err)
	}
	if durable {
		if err := s.dirf.Sync(); err != nil {
			return fmt.Errorf("local: sync state directory %s: %w", s.dir, err)
		}
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

// holderLocked reports whether somebody holds the flock of the liveness
// file at path, i.e. whether the grant's holder process is alive. A missing
// file counts as unlocked. The probe takes a shared lock, which conflicts
// only with the holder's exclusive one, and drops it at once.
func holderLocked(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("local: probe holder: %w", err)
	}
	defer f.Close()
	err = flock(f, unix.LOCK_SH|unix.LOCK_NB)
	switch {
	case err == nil:
		return false, nil // closing f drops the probe's lock
	case errors.Is(err, unix.EWOULDBLOCK):
		return true, nil
	default:
		return false, fmt.Errorf("local: probe holder %s: %w", path, err)
	}
}

// live reports whether st is a live grant at now (CLOCK_BOOTTIME): held,
// unexpired, of this boot, and its holder's liveness file locked.
func (s *Store) live(kf keyFiles, st state, now int64) (bool, error) {
	if st.Holder == "" || now >= st.Expires || st.BootID != s.bootID {
		return false, nil
	}
	return holderLocked(s.holder(kf, st.Term))
}

// createHolder creates and locks the liveness file of term. Any file of
// that name is a leftover of an acquisition that crashed before writing its
// record, so it is replaced.
func (s *Store) createHolder(kf keyFiles, term uint64) (*os.File, error) {
	path := s.holder(kf, term)
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("local: remove stale holder file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, fmt.Errorf("local: create holder file: %w", err)
	}
	if err := flock(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("local: lock holder file %s: %w", path, err)
	}
	return f, nil
}
