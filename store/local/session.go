//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

var _ tenure.SessionStore = (*Store)(nil)

// maxSessionTTL bounds a session's TTL (about 73 years), so that no
// expiry on CLOCK_BOOTTIME overflows.
const maxSessionTTL = math.MaxInt64 / 4

// session is a [tenure.StoreSession] of a local store: one session file in
// .sessions, write-locked for as long as the session lives and rewritten
// in place by every keep-alive, and the grants whose records name it.
type session struct {
	s   *Store
	id  string // the session file's name, 32 hex digits
	ttl time.Duration

	mu      sync.Mutex
	ended   bool
	fd      int                   // the session file, holding its OFD write lock; -1 once ended
	fid     fileID                // its identity
	sdID    fileID                // the .sessions directory it was created in
	expires int64                 // CLOCK_BOOTTIME, as the file says
	grants  map[string]*sessGrant // by key
	orphans []tenure.Lease        // grants written but not returned, whose undoing failed

	// For tests and benchmarks: keep-alives that wrote the session file,
	// and records they read because a grant's record had changed; and a
	// func KeepAlive calls right before it writes, if set.
	writes, reads int
	beforeWrite   func()
}

// sessGrant is a grant of the session: its lease, and the status of its
// record as the session last knew it current.
type sessGrant struct {
	lease tenure.Lease
	state string // the name of its record
	stamp recordStamp
	// settled: stamp was checked against the record's content once its
	// times were older than stampSettle, so any later write changes them.
	settled bool
}

// OpenSession implements [tenure.SessionStore]. It creates the session
// file .sessions/ID (O_EXCL, never following a link, mode 0600, or 0660
// with [GroupShared]), takes its OFD write lock and writes its expiry, ttl
// after the call's start on CLOCK_BOOTTIME. The session ends when it is
// closed, when its TTL passes without [tenure.StoreSession.KeepAlive], or
// when its file is closed by the process (Close of the handle, exit or
// death): every grant in it then ends at once for every process, and the
// watchers of their keys are woken. A bad ttl gives an error wrapping
// [tenure.ErrInvalid].
func (s *Store) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	if ttl <= 0 || ttl > maxSessionTTL {
		return nil, fmt.Errorf("%w: session ttl %s must be positive and at most %s", tenure.ErrInvalid, ttl, time.Duration(maxSessionTTL))
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	received := boottime()
	sd, err := s.sessDir()
	if err != nil {
		return nil, err
	}
	id := newToken()
	f, err := sd.openRaw(id, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL)
	if err != nil {
		return nil, fmt.Errorf("local: create session file: %w", err)
	}
	ss := &session{s: s, id: id, ttl: ttl, fd: f.fd, fid: idOf(&f.st), sdID: sd.id,
		expires: received + int64(ttl), grants: map[string]*sessGrant{}}
	if err := ofdLock(uintptr(f.fd), unix.F_WRLCK); err != nil {
		f.Close()
		_ = sd.remove(id)
		return nil, fmt.Errorf("local: lock session file %s: %w", f.name, err)
	}
	if err := ss.write(ss.expires); err != nil {
		f.Close()
		_ = sd.remove(id)
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		f.Close()
		_ = sd.remove(id)
		return nil, tenure.ErrClosed
	}
	s.sess[ss] = struct{}{}
	s.mu.Unlock()
	return ss, nil
}

// write writes the session file with expiry expires: one pwrite of the
// whole file at offset 0. Called with ss.mu held, or before ss is shared.
func (ss *session) write(expires int64) error {
	buf := sessionFile{id: ss.id, expires: expires, ttl: int64(ss.ttl), bootID: ss.s.bootID}.encode()
	for {
		n, err := unix.Pwrite(ss.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err == nil && n != len(buf) {
			err = fmt.Errorf("short write of %d bytes", n)
		}
		if err != nil {
			return fmt.Errorf("local: write session file %s: %w", ss.name(), err)
		}
		ss.writes++
		return nil
	}
}

// name is the session file's path, for messages.
func (ss *session) name() string { return ss.s.d.pathOf(sessionsDir + "/" + ss.id) }

// end closes the session file, if it is open: its lock drops, so every
// grant of the session ends for everybody, and its close wakes watchers.
func (ss *session) end() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.endLocked()
}

func (ss *session) endLocked() {
	if ss.ended {
		return
	}
	ss.ended = true
	unix.Close(ss.fd)
	ss.fd = -1
}

// lost ends the session for cause and returns an error matching
// [tenure.ErrLost]. Called with ss.mu held.
func (ss *session) lost(cause string) error {
	ss.endLocked()
	ss.grants = nil
	return fmt.Errorf("%w: session %s %s", tenure.ErrLost, ss.name(), cause)
}

// inPlace reports whether the session file in .sessions is still this
// session's: not deleted or replaced, nor .sessions itself.
func (ss *session) inPlace() (bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(ss.s.d.fd(), sessionsDir+"/"+ss.id, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("local: stat %s: %w", ss.name(), err)
	}
	if idOf(&st) != ss.fid {
		return false, nil
	}
	sd, err := ss.s.sessDir()
	if err != nil {
		return false, err
	}
	return sd.id == ss.sdID, nil
}

// usable returns the session's expiry if it can take a grant at now.
func (ss *session) usable(now int64) (int64, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case ss.ended:
		return 0, fmt.Errorf("%w: session %s ended", tenure.ErrLost, ss.name())
	case now >= ss.expires:
		return 0, ss.lost("expired")
	}
	return ss.expires, nil
}

// Acquire implements [tenure.StoreSession]. It is [Store.AcquireClaim]
// with the session's TTL, except that the grant has no liveness file: its
// record names the session, and the grant lives while the session does.
// The new term's .terms record is fsynced before it returns. A key this
// session already holds for identity is returned as it is.
func (ss *session) Acquire(ctx context.Context, key, identity, value string) (tenure.Lease, error) {
	l, _, err := ss.acquire(ctx, key, identity, value, true)
	return l, err
}

// acquire is Acquire, with the new term's .terms record fsynced only if
// durable; fresh says the grant is new, not one the session held already.
func (ss *session) acquire(ctx context.Context, key, identity, value string, durable bool) (tenure.Lease, bool, error) {
	s := ss.s
	if err := tenure.CheckClaim(key, tenure.Claim{Identity: identity, TTL: ss.ttl, Value: value}); err != nil {
		return tenure.Lease{}, false, err
	}
	mine := func(st state) (tenure.Lease, bool) {
		l, ok := ss.held(key, st)
		return l, ok && l.Identity == identity
	}
	return s.grantNext(ctx, key, mine, func(kf keyFiles, term uint64, wait time.Duration, now int64) (tenure.Lease, error) {
		expires, err := ss.usable(now)
		if err != nil {
			return tenure.Lease{}, err
		}
		token := newToken()
		next := state{
			Key: key, Holder: identity, Term: term, TTL: int64(ss.ttl),
			Expires: expires, BootID: s.bootID, Token: token, Value: value, Session: ss.id,
		}
		lease := tenure.Lease{Key: key, Identity: identity, Term: term, TTL: ss.ttl, Token: token, Wait: wait, Value: value}
		return lease, ss.writeGrant(kf, next, lease, durable)
	})
}

// held returns the grant of key recorded in st if this session made it
// and still knows it.
func (ss *session) held(key string, st state) (tenure.Lease, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	g := ss.grants[key]
	if g == nil || st.Session != ss.id || st.Token != g.lease.Token || st.Term != g.lease.Term {
		return tenure.Lease{}, false
	}
	return g.lease, true
}

// writeGrant writes next, a grant of the session, under the key's
// mutation lock: the record, then .terms (fsynced if fsync), and
// registers it. On
// error the grant is undone: its record is rewritten as released, or, if
// even that fails, kept as an orphan that the next KeepAlive releases
// before it extends the session, so it never lives on unknown.
func (ss *session) writeGrant(kf keyFiles, next state, l tenure.Lease, fsync bool) error {
	s := ss.s
	mode := renamed
	if fsync {
		mode = durable
	}
	// The record first, then .terms, as [Store.writeGrant] does and for
	// its reasons.
	if err := writeState(s.d, s.t, kf.state, next, renamed); err != nil {
		return err
	}
	s.seeState(next.Key, next)
	stamp, _, err := s.stampOf(kf.state)
	if err == nil {
		err = writeState(s.t, s.t, kf.term, next, mode)
	}
	if err == nil {
		err = ss.add(l, kf.state, stamp)
	}
	if err == nil {
		s.dropKey(next.Key)
		return nil
	}
	if uerr := s.writeReleased(kf, next); uerr != nil {
		ss.mu.Lock()
		ss.orphans = append(ss.orphans, l)
		ss.mu.Unlock()
	}
	return err
}

// add registers l, whose record has stamp; it fails once the session
// ended (the record names a dead session then, and is released by the
// caller for tidiness).
func (ss *session) add(l tenure.Lease, state string, stamp recordStamp) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended {
		return fmt.Errorf("%w: session %s ended", tenure.ErrLost, ss.name())
	}
	ss.grants[l.Key] = &sessGrant{lease: l, state: state, stamp: stamp}
	return nil
}

// AcquireBatch implements [tenure.BatchAcquirer]: each request as Acquire,
// one key at a time (one mutation lock held at once, so batches never
// deadlock), with their .terms records written without fsync, then one
// syncfs(2) of the file system for the whole batch before any lease is
// returned: the fsync pair of each Acquire becomes one call, which also
// flushes whatever else is pending on that file system. If that fails,
// the batch's new grants are released and each result carries the error.
func (ss *session) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	res := make([]tenure.AcquireResult, len(reqs))
	var fresh []int
	for i, r := range reqs {
		var isNew bool
		res[i].Lease, isNew, res[i].Err = ss.acquire(ctx, r.Key, r.Identity, r.Value, false)
		if res[i].Err == nil && isNew {
			fresh = append(fresh, i)
		}
	}
	if len(fresh) == 0 {
		return res
	}
	err := unix.Syncfs(ss.s.t.fd())
	for err == unix.EINTR {
		err = unix.Syncfs(ss.s.t.fd())
	}
	if err == nil {
		return res
	}
	err = fmt.Errorf("local: sync the terms of a batch of %d grants in %s: %w", len(fresh), ss.s.t.path, err)
	for _, i := range fresh {
		l := res[i].Lease
		if rerr := ss.Release(ctx, l); rerr != nil && !errors.Is(rerr, tenure.ErrLost) {
			ss.mu.Lock()
			ss.orphans = append(ss.orphans, l)
			ss.mu.Unlock()
		}
		res[i] = tenure.AcquireResult{Err: err}
	}
	return res
}

// KeepAlive implements [tenure.StoreSession]. It rewrites the session file
// in place with its new expiry, ttl after the call's start: one pwrite,
// whatever the number of grants. It fails with [tenure.ErrLost], ending
// the session, if the session expired before the call, if its file was
// deleted or replaced from outside, or if the write completed only after
// the old expiry (another process may have judged the session over
// meanwhile). It then looks for grants ended from outside with one
// fstatat of each grant's record, reading a record only when it changed
// since the session last knew it current, or its times were too recent
// to show a later write (see stampSettle); the grants whose record no
// longer names them are returned and forgotten.
func (ss *session) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	s := ss.s
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := ss.releaseOrphans(ctx); err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended {
		return nil, fmt.Errorf("%w: session %s ended", tenure.ErrLost, ss.name())
	}
	received := boottime()
	if received >= ss.expires {
		return nil, ss.lost("expired")
	}
	in, err := ss.inPlace()
	if err != nil {
		return nil, err
	}
	if !in {
		return nil, ss.lost("was removed or replaced from outside")
	}
	old, next := ss.expires, received+int64(ss.ttl)
	if ss.beforeWrite != nil {
		ss.beforeWrite()
	}
	if err := ss.write(next); err != nil {
		return nil, err
	}
	if boottime() >= old {
		return nil, ss.lost("expired while its keep-alive was written")
	}
	ss.expires = next
	return ss.gone()
}

// releaseOrphans releases the grants written but not returned. It takes
// their keys' mutation locks, so it is called without ss.mu (an Acquire
// holding one of them may be waiting for ss.mu).
func (ss *session) releaseOrphans(ctx context.Context) error {
	ss.mu.Lock()
	orphans := ss.orphans
	ss.orphans = nil
	ss.mu.Unlock()
	for i, l := range orphans {
		if err := ss.s.Release(ctx, l); err != nil && !errors.Is(err, tenure.ErrLost) {
			ss.mu.Lock()
			ss.orphans = append(ss.orphans, orphans[i:]...)
			ss.mu.Unlock()
			return fmt.Errorf("local: release a grant of session %s that Acquire could not return: %w", ss.name(), err)
		}
	}
	return nil
}

// gone returns and forgets the grants whose records no longer name them.
// Called with ss.mu held.
func (ss *session) gone() ([]tenure.Lease, error) {
	s := ss.s
	var gone []tenure.Lease
	for key, g := range ss.grants {
		stamp, ok, err := s.stampOf(g.state)
		if err != nil {
			return nil, err
		}
		if ok && stamp == g.stamp && g.settled {
			continue
		}
		if ok {
			ss.reads++
			st, ok, err := readRecord(s.d, g.state)
			if err != nil && !errors.Is(err, ErrCorrupt) {
				return nil, err
			}
			if err == nil && ok && st.Session == ss.id && st.Token == g.lease.Token && st.Term == g.lease.Term {
				// Still this grant: new, or rewritten (a Renew through
				// the Store).
				g.stamp, g.settled = stamp, stamp.settled(time.Now())
				continue
			}
		}
		gone = append(gone, g.lease)
		delete(ss.grants, key)
	}
	return gone, nil
}

// Release implements [tenure.StoreSession]: [Store.Release] of l, which
// ends it at once; the session lives on.
func (ss *session) Release(ctx context.Context, l tenure.Lease) error {
	err := ss.s.Release(ctx, l)
	ss.mu.Lock()
	// Only this grant: a retried release of an older term must not forget
	// a newer grant of the key, which would then live on unknown.
	if g := ss.grants[l.Key]; g != nil && g.lease.Token == l.Token && g.lease.Term == l.Term {
		delete(ss.grants, l.Key)
	}
	ss.mu.Unlock()
	return err
}

// Close implements [tenure.StoreSession]. It closes the session file
// first, which ends every grant of the session at once for every process
// and wakes their watchers; then, as far as ctx allows, it records each
// grant as released (so that the next holder of its key gets no Wait) and
// removes the session file once none is left.
func (ss *session) Close(ctx context.Context) error {
	s := ss.s
	ss.mu.Lock()
	if ss.ended {
		ss.mu.Unlock()
		return fmt.Errorf("%w: session %s ended", tenure.ErrLost, ss.name())
	}
	leases := append([]tenure.Lease(nil), ss.orphans...)
	for _, g := range ss.grants {
		leases = append(leases, g.lease)
	}
	_ = ss.lost("closed")
	ss.mu.Unlock()
	s.mu.Lock()
	delete(s.sess, ss)
	s.mu.Unlock()
	tidy := true
	for _, l := range leases {
		err := s.mutate(ctx, l.Key, func(kf keyFiles, st state, ok bool) error {
			if !ok || st.Session != ss.id || st.Token != l.Token || st.Term != l.Term {
				return nil
			}
			return s.writeReleased(kf, st)
		})
		if err != nil {
			tidy = false
		}
	}
	if tidy {
		if sd, err := s.sessDir(); err == nil && sd.id == ss.sdID {
			_ = sd.remove(ss.id)
		}
	}
	return nil
}
