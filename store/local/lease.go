//go:build linux

package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/tenurehq/tenure"
)

// begin checks the handle and ctx before a call.
func (s *Store) begin(ctx context.Context) error {
	if err := s.checkOpen(); err != nil {
		return err
	}
	return ctx.Err()
}

// mutate runs fn on key's record under the key's mutation lock, waiting for
// the lock until ctx is done. ok is false if the key was never granted.
func (s *Store) mutate(ctx context.Context, key string, fn func(kf keyFiles, st state, ok bool) error) error {
	kf := s.files(key)
	lk, err := lockKey(ctx, kf.lock)
	if err != nil {
		return err
	}
	defer lk.Close() // drops the flock
	st, ok, err := readState(kf.state)
	if err != nil {
		return err
	}
	if ok && st.Key != key {
		return fmt.Errorf("%w %s: it belongs to key %q, not %q (hash collision)", ErrCorrupt, kf.state, st.Key, key)
	}
	// A caller that gave up while we waited for the lock gets nothing done.
	if err := s.begin(ctx); err != nil {
		return err
	}
	return fn(kf, st, ok)
}

// record returns the public view of st at now, given its liveness.
func record(key string, st state, live bool, now int64) tenure.Record {
	r := tenure.Record{Key: key, Term: st.Term}
	if live {
		r.Holder = st.Holder
		r.TTL = time.Duration(st.TTL)
		r.Remaining = time.Duration(st.Expires - now)
	}
	return r
}

// Acquire implements [tenure.Store]. It blocks while another call holds the
// key's mutation lock (a few file operations), until ctx is done. The new
// record is fsynced before Acquire returns, so the term survives a crash or
// a power loss. The grant lasts until its TTL passes without Renew, until
// Release, or until the liveness file is closed by every process holding
// it (Close, or the death of the process and of any child it was passed to
// with [Store.LeaseFiles]).
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	if err := tenure.CheckAcquire(key, identity, ttl); err != nil {
		return tenure.Lease{}, err
	}
	if err := s.begin(ctx); err != nil {
		return tenure.Lease{}, err
	}
	var lease tenure.Lease
	var oldHolder string
	err := s.mutate(ctx, key, func(kf keyFiles, st state, ok bool) error {
		now := boottime()
		if ok {
			live, err := s.live(kf, st, now)
			if err != nil {
				return err
			}
			if live {
				return &tenure.HeldError{Record: record(key, st, true, now)}
			}
			if st.Term == math.MaxUint64 {
				return fmt.Errorf("local: key %q has used up its terms", key)
			}
			oldHolder = s.holder(kf, st.Term)
		}
		term := st.Term + 1
		hf, err := s.createHolder(kf, term)
		if err != nil {
			return err
		}
		token, err := newToken()
		if err == nil {
			err = s.writeState(kf, state{
				Key: key, Holder: identity, Term: term, TTL: int64(ttl),
				Expires: now + int64(ttl), BootID: s.bootID, Token: token,
			}, true)
		}
		if err == nil {
			err = s.addGrant(token, &grant{key: key, term: term, f: hf})
		}
		if err != nil {
			// Whatever was written, the grant is dead without its file.
			hf.Close()
			os.Remove(hf.Name())
			return err
		}
		lease = tenure.Lease{Key: key, Identity: identity, Term: term, TTL: ttl, Token: token}
		return nil
	})
	if err != nil {
		return tenure.Lease{}, err
	}
	if oldHolder != "" {
		// The previous grant is over; its file is garbage (a stalled holder
		// may still have it open, which is harmless once unlinked).
		// Best effort: a leftover file is never mistaken for a live grant.
		_ = os.Remove(oldHolder)
	}
	return lease, nil
}

func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("local: random token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// current checks that l is the live grant recorded in st at now; it
// returns an error matching ErrLost if not.
func (s *Store) current(kf keyFiles, l tenure.Lease, st state, ok bool, now int64) error {
	if !ok || st.Term != l.Term || st.Token != l.Token || st.Holder != l.Identity || l.Token == "" {
		return fmt.Errorf("%w: key %q term %d was released or superseded", tenure.ErrLost, l.Key, l.Term)
	}
	live, err := s.live(kf, st, now)
	if err != nil {
		return err
	}
	if !live {
		return fmt.Errorf("%w: key %q term %d expired or its holder exited", tenure.ErrLost, l.Key, l.Term)
	}
	return nil
}

// settle closes this handle's liveness file of l when err says l is over,
// so a lost grant does not keep its file open. A forged lease carrying a
// live grant's token closes nothing: only the record decides.
func (s *Store) settle(kf keyFiles, l tenure.Lease, err error) {
	if !errors.Is(err, tenure.ErrLost) || !s.owns(l) {
		return
	}
	st, ok, rerr := readState(kf.state)
	if rerr != nil {
		return
	}
	if ok && st.Token == l.Token {
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
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := tenure.CheckKey(l.Key); err != nil {
		return fmt.Errorf("%w: %w", tenure.ErrLost, err)
	}
	var kf keyFiles
	err := s.mutate(ctx, l.Key, func(f keyFiles, st state, ok bool) error {
		kf = f
		if err := s.current(kf, l, st, ok, received); err != nil {
			return err
		}
		st.Expires = received + st.TTL
		return s.writeState(kf, st, false)
	})
	s.settle(kf, l, err)
	return err
}

// Release implements [tenure.Store]: it records the key as free (keeping
// the term) and, if l was acquired through this handle, closes and removes
// its liveness file. It may be called through any handle.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	received := boottime()
	if err := s.begin(ctx); err != nil {
		return err
	}
	if err := tenure.CheckKey(l.Key); err != nil {
		return fmt.Errorf("%w: %w", tenure.ErrLost, err)
	}
	var kf keyFiles
	err := s.mutate(ctx, l.Key, func(f keyFiles, st state, ok bool) error {
		kf = f
		if err := s.current(kf, l, st, ok, received); err != nil {
			return err
		}
		st.Holder, st.Token, st.TTL, st.Expires = "", "", 0, 0
		return s.writeState(kf, st, false)
	})
	if err != nil {
		s.settle(kf, l, err)
		return err
	}
	s.dropGrant(l.Token)
	// Another handle that made the grant keeps its (now unlinked) file
	// open until it notices; the record already says the key is free.
	// the next Acquire removes it if this fails.
	_ = os.Remove(s.holder(kf, l.Term))
	return nil
}

// Get implements [tenure.Store]. It takes no lock: records are replaced by
// rename, so it reads either the old or the new one. It blocks only for a
// few file operations.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return tenure.Record{}, err
	}
	if err := s.begin(ctx); err != nil {
		return tenure.Record{}, err
	}
	return s.get(key)
}

func (s *Store) get(key string) (tenure.Record, error) {
	kf := s.files(key)
	st, ok, err := readState(kf.state)
	if err != nil {
		return tenure.Record{}, err
	}
	if !ok {
		return tenure.Record{Key: key}, nil
	}
	if st.Key != key {
		return tenure.Record{}, fmt.Errorf("%w %s: it belongs to key %q, not %q (hash collision)", ErrCorrupt, kf.state, st.Key, key)
	}
	now := boottime()
	live, err := s.live(kf, st, now)
	if err != nil {
		return tenure.Record{}, err
	}
	return record(key, st, live, now), nil
}
