//go:build linux

package local

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/token"
)

// begin checks the handle and ctx before a call.
func (s *Store) begin(ctx context.Context) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	return ctxerr.Err(ctx)
}

// checkCall checks key with [tenure.CheckKey], then runs begin: what a call
// on one key checks before it touches the directory.
func (s *Store) checkCall(ctx context.Context, key string) error {
	if err := tenure.CheckKey(key); err != nil {
		return err
	}
	return s.begin(ctx)
}

// mutate runs fn on key's record under the key's mutation lock, waiting for
// the lock until ctx is done. ok is false if the record does not exist.
// Every term read is remembered in the process (see).
func (s *Store) mutate(ctx context.Context, key string, fn func(kf keyFiles, st state, ok bool) error) error {
	kf := s.files(key)
	lk, err := s.lockKey(ctx, kf.lock)
	if err != nil {
		return err
	}
	defer lk.Close() // drops the lock
	st, ok, err := readRecord(s.d, kf.state)
	if err != nil {
		return err
	}
	if ok && st.Key != key {
		return fmt.Errorf("%w %s: it belongs to key %q, not %q (hash collision)", ErrCorrupt, s.d.pathOf(kf.state), st.Key, key)
	}
	if ok {
		s.seeState(key, st)
	}
	// A caller that gave up while we waited for the lock gets nothing done.
	if err := s.begin(ctx); err != nil {
		return err
	}
	return fn(kf, st, ok)
}

// readTerm reads the key's .terms record: the state as of its last Acquire
// or Release. ok is false if there is none (a key never granted, or granted
// only by a version of tenure without .terms).
func (s *Store) readTerm(kf keyFiles, key string) (hw state, ok bool, err error) {
	hw, ok, err = readState(s.t, kf.term)
	if err != nil {
		return state{}, false, err
	}
	if ok && hw.Key != key {
		return state{}, false, fmt.Errorf("%w %s: it belongs to key %q, not %q (hash collision)", ErrCorrupt, s.t.pathOf(kf.term), hw.Key, key)
	}
	if ok {
		s.seeState(key, hw)
	}
	return hw, ok, nil
}

// waitMargin is added to every Lease.Wait the store computes, covering the
// moments between the caller's sending Acquire and the store's clock read.
const waitMargin = 10 * time.Millisecond

// unreleasedWait returns how long a new holder of the key must wait before
// starting its task when the previous grant ended without its holder's
// release while that holder may still be running: its files were deleted
// or replaced from outside, so it learns of the loss only at its next
// Renew. received and now are CLOCK_BOOTTIME readings at the call's start
// and under the lock; 0 means no wait is needed.
func (s *Store) unreleasedWait(kf keyFiles, st state, ok bool, hw state, hok bool, received, now int64) (time.Duration, error) {
	// The record names an unexpired grant of this boot whose liveness file
	// is gone: its holder may be alive; it has until st.Expires.
	if ok && st.Holder != "" && st.BootID == s.bootID && st.Session != "" {
		// A grant of a session whose file is gone: its expiry went with
		// the file, and its holder may have kept it alive just before.
		v, err := s.readSession(st.Session)
		if err != nil {
			return 0, err
		}
		if !v.exists {
			return time.Duration(st.TTL+now-received) + waitMargin, nil
		}
	} else if ok && st.Holder != "" && st.BootID == s.bootID && now < st.Expires {
		_, exists, err := s.holderState(holderName(kf, st.Term))
		if err != nil {
			return 0, err
		}
		if !exists {
			return time.Duration(st.Expires-received) + waitMargin, nil
		}
	}
	// The last grant in .terms was never released, but the record no
	// longer shows it (deleted or replaced): its holder may have renewed
	// just before, so it may lead until one TTL after now.
	if hok && hw.Holder != "" && hw.BootID == s.bootID && (!ok || st.Token != hw.Token) && hw.Session != "" {
		// The same for a session grant: none is needed once its session
		// is over (closed, its holder dead, or expired).
		v, err := s.readSession(hw.Session)
		if err != nil {
			return 0, err
		}
		if v.exists && !v.liveAt(now) {
			return 0, nil
		}
		return time.Duration(hw.TTL+now-received) + waitMargin, nil
	}
	if hok && hw.Holder != "" && hw.BootID == s.bootID && (!ok || st.Token != hw.Token) {
		locked, exists, err := s.holderState(holderName(kf, hw.Term))
		if err != nil {
			return 0, err
		}
		if exists && !locked {
			return 0, nil // its holder exited
		}
		return time.Duration(hw.TTL+now-received) + waitMargin, nil
	}
	// Every file of the key was deleted, .terms included, but this process
	// saw a later grant held: its holder may be running still.
	if m := s.remembered(kf.key); m.held && m.term > max(st.Term, hw.Term) {
		return m.ttl + time.Duration(now-received) + waitMargin, nil
	}
	return 0, nil
}

// record returns the public view of st at now, given its liveness.
func record(key string, st state, live bool, now int64) tenure.Record {
	r := tenure.Record{Key: key, Term: st.Term}
	if live {
		r.Holder = st.Holder
		r.Value = st.Value
		r.TTL = time.Duration(st.TTL)
		r.Remaining = time.Duration(st.Expires - now)
	}
	return r
}

// Acquire implements [tenure.Store]. It blocks while another call holds the
// key's mutation lock (a few file operations), until ctx is done. The new
// term's .terms record is fsynced before Acquire returns, so the term
// survives a crash or a power loss. The grant lasts until its TTL passes without Renew, until
// Release, or until the liveness file is closed by every process holding
// it (Close, or the death of the process and of any child it was passed to
// with [Store.LeaseFiles]).
//
// The term is one above the highest of the key's record, its .terms record
// and every term this process has seen for the key, so deleting the key's
// files does not restart its terms. Lease.Wait is set when the previous
// grant ended without its holder's release or expiry while that holder may
// still be running: its liveness file was removed while the record was
// unexpired (Wait runs to the record's expiry), or the record itself was
// removed or replaced while .terms shows the grant unreleased (Wait is that
// grant's TTL, since its holder may have renewed just before).
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Store.Acquire], keeping
// c.Value in the key's record with the grant.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	if err := tenure.CheckClaim(key, c); err != nil {
		return tenure.Lease{}, err
	}
	identity, ttl := c.Identity, c.TTL
	lease, _, err := s.grantNext(ctx, key, nil, func(kf keyFiles, term uint64, wait time.Duration, now int64) (tenure.Lease, error) {
		token, err := s.writeGrant(kf, state{
			Key: key, Holder: identity, Term: term, TTL: int64(ttl),
			Expires: now + int64(ttl), BootID: s.bootID, Value: c.Value,
		})
		if err != nil {
			return tenure.Lease{}, err
		}
		return tenure.Lease{Key: key, Identity: identity, Term: term, TTL: ttl, Token: token, Wait: wait, Value: c.Value}, nil
	})
	return lease, err
}

// grantNext is what every Acquire (of the Store and of its sessions)
// decides under the key's mutation lock: whether key may be granted, with
// which term, and how long the new holder must wait. A live grant of the
// key is the caller's own if mine returns it (fresh is then false), else a
// *[tenure.HeldError]. Otherwise it calls write with the next term, one
// above the highest of the key's record, of .terms and of this process's
// memory (so deleting the key's files cannot make terms go backwards),
// with the Lease.Wait owed to a grant that ended without its holder's
// release (see unreleasedWait) and with the clock reading it judged by;
// write makes the grant. The liveness files of earlier grants are removed
// after. mine may be nil.
func (s *Store) grantNext(ctx context.Context, key string, mine func(st state) (tenure.Lease, bool),
	write func(kf keyFiles, term uint64, wait time.Duration, now int64) (tenure.Lease, error)) (lease tenure.Lease, fresh bool, err error) {
	if err := s.begin(ctx); err != nil {
		return tenure.Lease{}, false, err
	}
	received := boottime()
	var oldHolders []string
	err = s.mutate(ctx, key, func(kf keyFiles, st state, ok bool) error {
		hw, hok, err := s.readTerm(kf, key)
		if err != nil {
			return err
		}
		now := boottime()
		if ok {
			exp, live, err := s.liveUntil(kf, st, now)
			if err != nil {
				return err
			}
			if live {
				if mine != nil {
					if l, ok := mine(st); ok {
						lease = l
						return nil
					}
				}
				st.Expires = exp
				return &tenure.HeldError{Record: record(key, st, true, now)}
			}
			oldHolders = append(oldHolders, holderName(kf, st.Term))
		}
		if hok && (!ok || hw.Term != st.Term) {
			oldHolders = append(oldHolders, holderName(kf, hw.Term))
		}
		wait, err := s.unreleasedWait(kf, st, ok, hw, hok, received, now)
		if err != nil {
			return err
		}
		last := s.see(key, max(st.Term, hw.Term))
		if last == math.MaxUint64 {
			return fmt.Errorf("%w: local: key %q has used up its terms: its term is 2^64-1, the largest there is (was its record written from outside?)", tenure.ErrTermsExhausted, key)
		}
		lease, err = write(kf, last+1, wait, now)
		fresh = err == nil
		return err
	})
	if err != nil {
		return tenure.Lease{}, false, err
	}
	// The previous grants are over; their files are garbage (a stalled
	// holder may still have one open, which is harmless once unlinked).
	// Best effort: a leftover file is never mistaken for a live grant.
	for _, name := range oldHolders {
		_ = s.d.remove(name)
	}
	return lease, fresh, nil
}

// writeGrant writes the grant next (without its Token, which it draws and
// returns): its liveness file, then .terms, then the key's record, and
// registers it with the handle. On error the grant is dead: its liveness
// file is closed and removed, whatever was written.
func (s *Store) writeGrant(kf keyFiles, next state) (string, error) {
	hf, hid, err := s.createHolder(kf, next.Term)
	if err != nil {
		return "", err
	}
	next.Token = newToken()
	// The record first, then .terms, and only .terms fsynced: .terms
	// alone carries the term high-water mark across a power loss (the next
	// term is one above the highest of both, so a record that lost its
	// last write cannot lower it), and each fsync costs every handoff
	// milliseconds. In this order a reader never sees the new term without
	// its holder (the first grant of a key has no record before it), and
	// a crash between the two writes loses at most a term that was never
	// handed out: Acquire returns only after .terms is on disk.
	err = writeState(s.d, s.t, kf.state, next, renamed)
	if err == nil {
		err = writeState(s.t, s.t, kf.term, next, durable)
	}
	if err == nil {
		s.seeState(next.Key, next)
		err = s.addGrant(next.Token, &grant{key: next.Key, term: next.Term, f: hf, id: hid, name: holderName(kf, next.Term)})
	}
	if err != nil {
		hf.Close()
		_ = s.d.remove(holderName(kf, next.Term))
		return "", err
	}
	return next.Token, nil
}

// newToken returns a new grant or session token: 16 random bytes, hex-encoded.
func newToken() string { return token.Hex(16) }

// current checks that l is the live grant recorded in st at now; it
// returns an error matching ErrLost if not.
func (s *Store) current(kf keyFiles, l tenure.Lease, st state, ok bool, now int64) error {
	if !ok || st.Term != l.Term || st.Token != l.Token || st.Holder != l.Identity || l.Token == "" {
		return fmt.Errorf("%w: key %q term %d was released or superseded", tenure.ErrLost, l.Key, l.Term)
	}
	if id, ok := s.grantFile(l); ok {
		// Made through this handle: its liveness file must still be the
		// one in the directory, or the grant was deleted from outside;
		// this handle holds its lock (see live).
		same, err := s.d.isFile(holderName(kf, l.Term), id)
		if err != nil {
			return err
		}
		if !same {
			return fmt.Errorf("%w: key %q term %d: its liveness file %s was removed or replaced from outside", tenure.ErrLost, l.Key, l.Term, s.d.pathOf(holderName(kf, l.Term)))
		}
		if !s.unexpired(st, now) {
			return expired(l)
		}
		return nil
	}
	live, err := s.live(kf, st, now)
	if err != nil {
		return err
	}
	if !live {
		return expired(l)
	}
	return nil
}

// expired is the error of a grant l whose TTL passed or whose holder exited.
func expired(l tenure.Lease) error {
	return fmt.Errorf("%w: key %q term %d expired or its holder exited", tenure.ErrLost, l.Key, l.Term)
}

// settle closes this handle's liveness file of l when err says l is over,
// so a lost grant does not keep its file open. A forged lease carrying a
// live grant's token closes nothing: only the record decides.
func (s *Store) settle(kf keyFiles, l tenure.Lease, err error) {
	if !errors.Is(err, tenure.ErrLost) || !s.owns(l) {
		return
	}
	st, ok, rerr := readRecord(s.d, kf.state)
	if rerr != nil {
		return
	}
	if id, mine := s.grantFile(l); ok && st.Token == l.Token && mine {
		if same, serr := s.d.isFile(holderName(kf, l.Term), id); serr != nil || !same {
			s.dropGrant(l.Token) // its file was removed: the grant is over
			return
		}
		if live, lerr := s.live(kf, st, boottime()); lerr != nil || live {
			return
		}
	}
	s.dropGrant(l.Token)
}

// Renew implements [tenure.Store]. Expiry is judged when Renew is called;
// the new expiry is TTL after that. It blocks like Acquire but does not
// fsync: after a power loss the grant is dead anyway (another boot).
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	received := boottime()
	kf, err := s.mutateGrant(ctx, l, received, func(kf keyFiles, st state) error {
		st.Expires = received + st.TTL
		return writeState(s.d, s.t, kf.state, st, swapped)
	})
	s.settle(kf, l, err)
	return err
}

// mutateGrant runs fn under the key's lock (see mutate) with the key's
// record, if l is its current grant as of received; else it returns the
// error of [Store.current]. It returns the key's files, for settle.
func (s *Store) mutateGrant(ctx context.Context, l tenure.Lease, received int64, fn func(kf keyFiles, st state) error) (keyFiles, error) {
	if err := s.begin(ctx); err != nil {
		return keyFiles{}, err
	}
	if err := tenure.CheckKey(l.Key); err != nil {
		return keyFiles{}, fmt.Errorf("%w: %w", tenure.ErrLost, err)
	}
	var kf keyFiles
	err := s.mutate(ctx, l.Key, func(f keyFiles, st state, ok bool) error {
		kf = f
		if err := s.current(kf, l, st, ok, received); err != nil {
			return err
		}
		return fn(kf, st)
	})
	return kf, err
}

// Release implements [tenure.Store]: it records the key as free (keeping
// the term) and, if l was acquired through this handle, closes and removes
// its liveness file. It may be called through any handle.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	kf, err := s.mutateGrant(ctx, l, boottime(), s.writeReleased)
	if err != nil {
		s.settle(kf, l, err)
		return err
	}
	s.dropGrant(l.Token)
	// Another handle that made the grant keeps its (now unlinked) file
	// open until it notices; the record already says the key is free.
	// the next Acquire removes it if this fails.
	_ = s.d.remove(holderName(kf, l.Term))
	return nil
}

// writeReleased records the grant in st, the key's current record, as
// released, keeping its term. The caller holds the key's mutation lock.
func (s *Store) writeReleased(kf keyFiles, st state) error {
	st.Holder, st.Token, st.TTL, st.Expires, st.Value, st.Session = "", "", 0, 0, "", ""
	// .terms (and this process) learn of the release, so a later
	// Acquire after the key's files are deleted knows this grant
	// needs no wait.
	if err := writeState(s.t, s.t, kf.term, st, renamed); err != nil {
		return err
	}
	if err := writeState(s.d, s.t, kf.state, st, renamed); err != nil {
		return err
	}
	s.seeState(kf.key, st)
	return nil
}

// Get implements [tenure.Store]. It takes no lock: records are replaced by
// rename, so it reads either the old or the new one. It blocks only for a
// few file operations.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return tenure.Record{}, err
	}
	return s.get(key)
}

func (s *Store) get(key string) (tenure.Record, error) {
	r, _, err := s.getSession(key)
	return r, err
}

// getSession is get, also returning the session the record names, if any.
func (s *Store) getSession(key string) (tenure.Record, string, error) {
	kf := s.files(key)
	st, ok, err := readRecord(s.d, kf.state)
	if err != nil {
		return tenure.Record{}, "", err
	}
	if !ok {
		// The record was never written, or was deleted: the key is free
		// and its last term is the one .terms (or this process) knows.
		hw, _, err := s.readTerm(kf, key)
		if err != nil {
			return tenure.Record{}, "", err
		}
		return tenure.Record{Key: key, Term: s.see(key, hw.Term)}, "", nil
	}
	if st.Key != key {
		return tenure.Record{}, "", fmt.Errorf("%w %s: it belongs to key %q, not %q (hash collision)", ErrCorrupt, s.d.pathOf(kf.state), st.Key, key)
	}
	s.seeState(key, st)
	now := boottime()
	// A grant of this handle is live only while its own liveness file is
	// the one in the directory (see live), so the leader's watch sees a
	// file replaced from outside as the end of it.
	exp, live, err := s.liveUntil(kf, st, now)
	if err != nil {
		return tenure.Record{}, "", err
	}
	st.Expires = exp
	return record(key, st, live, now), st.Session, nil
}
