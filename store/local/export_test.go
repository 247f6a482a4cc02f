//go:build linux

package local

import (
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

// SetFSType makes every state directory opened until the returned
// function is called report the file system magic number magic, as on a
// file system this machine cannot mount.
func SetFSType(magic uint32) (restore func()) {
	old := fstatfs
	fstatfs = func(fd int, st *unix.Statfs_t) error {
		err := old(fd, st)
		setType(&st.Type, magic)
		return err
	}
	return func() { fstatfs = old }
}

// setType sets a statfs f_type, 64 bits wide on most platforms, 32 on some.
func setType[T int32 | int64](p *T, magic uint32) { *p = T(magic) }

// SetRunUserDir points DefaultDir's /run/user at dir until the returned
// function is called.
func SetRunUserDir(dir string) (restore func()) {
	old := runUserDir
	runUserDir = dir
	return func() { runUserDir = old }
}

// ForgetSeen drops this process's memory of the terms of every key in the
// state directory dir (an absolute path), so a test can check what the
// files alone guarantee.
func ForgetSeen(dir string) {
	seen.Lock()
	defer seen.Unlock()
	for k := range seen.m {
		if k.dir == dir {
			delete(seen.m, k)
		}
	}
}

// BaseName is the file-name prefix of key's files in a state directory.
func BaseName(key string) string { return baseName(key) }

// TermsDir is the directory, inside a state directory, of the keys' term
// records.
const TermsDir = termsDir

// WatchCounts returns how many events s dispatched to its watches (one per
// event and key, however many watches it woke) and how many reads it made
// for them.
func WatchCounts(s *Store) (events, reads uint64) {
	return s.watchEvents.Load(), s.watchReads.Load()
}

// CachedReads returns how many records s read back without decoding them,
// because they were exactly what s last wrote.
func CachedReads(s *Store) uint64 { return s.d.recs.hits.Load() }

// OverwriteRecord rewrites key's record in dir in place (same file, as a
// restored backup or another tool would), naming identity with a token of
// its own and keeping everything else: term, expiry, session.
func OverwriteRecord(dir, key, identity string) error {
	return rewriteRecord(dir, key, func(st *state) { st.Holder, st.Token = identity, strings.Repeat("5", 32) })
}

// SetRecordTerm rewrites key's record in dir in place with term, keeping
// everything else, as a tool with write access to the directory could.
func SetRecordTerm(dir, key string, term uint64) error {
	return rewriteRecord(dir, key, func(st *state) { st.Term = term })
}

// rewriteRecord rewrites key's record in dir in place, changed by change.
func rewriteRecord(dir, key string, change func(*state)) error {
	name := filepath.Join(dir, baseName(key)+".state")
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	st, err := decodeState(data)
	if err != nil {
		return err
	}
	change(&st)
	return os.WriteFile(name, encodeState(st), 0o600)
}

// SessionID returns the id of ss, a session of a local store: the name of
// its file in the state directory's .sessions.
func SessionID(ss tenure.StoreSession) string { return ss.(*session).id }

// SessionCounts returns how many times ss wrote its session file, and how
// many records its keep-alives read because a grant's record had changed.
func SessionCounts(ss tenure.StoreSession) (writes, reads int) {
	s := ss.(*session)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes, s.reads
}

// SessionsDir is the directory, inside a state directory, of the session
// files.
const SessionsDir = sessionsDir

// StampSettle is how old a record's times must be before a session's
// KeepAlive trusts them to show any later write without reading it.
const StampSettle = stampSettle

// BeforeKeepAliveWrite makes ss's keep-alives call f right before they
// write the session file.
func BeforeKeepAliveWrite(ss tenure.StoreSession, f func()) {
	s := ss.(*session)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beforeWrite = f
}

// WriteFormat rewrites key's record in dir in place as a build of another
// format could have written it: format version in the header, and the
// JSON body with extra (`"name":value` pairs, or "") added to its fields.
func WriteFormat(dir, key string, version uint16, extra string) error {
	name := filepath.Join(dir, baseName(key)+".state")
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	body := data[headerLen : len(data)-trailerLen]
	if extra != "" {
		body = append(append([]byte(nil), body[:len(body)-1]...), ","+extra+"}"...)
	}
	framed := frame(body)
	framed[len(stateMagic)], framed[len(stateMagic)+1] = byte(version>>8), byte(version)
	return os.WriteFile(name, framed, 0o600)
}
