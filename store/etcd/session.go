package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
)

var _ tenure.SessionStore = (*Store)(nil)

// OpenSession implements [tenure.SessionStore]: a session is one etcd
// lease, and every grant in it a holder key attached to that lease, as in
// etcd's own concurrency.Session. A keep-alive costs two requests sent
// together, whatever the number of grants: the lease's keep-alive on the
// store's keep-alive stream, and a TimeToLive whose answer carries etcd's
// revision. When that revision moved since the last check (a write
// anywhere in etcd moves it; keep-alives do not), two more tell the
// grants taken away from outside: a TimeToLive that lists the keys still
// attached to the lease (the grants deleted or rewritten without the
// lease), and a read of the holder keys changed since (keys only: the
// grants rewritten on the lease, etcdctl put --ignore-lease). etcd reads
// every holder key under the prefix to answer the latter, so on an etcd
// that other writers keep busy a keep-alive costs server work that grows
// with the keys under the prefix (about 3.5 ms of an embedded etcd's time
// for 10,000 holder keys, on a 2-core VM: some 0.1 % of a core per
// session at TTL 10 s); on a quiet one it does not grow with them. The
// revision is that of the etcd member the client talks to: a write that
// member has not applied yet is seen by the keep-alive after.
// Close revokes the lease, which deletes every holder key of the session
// at once.
//
// etcd counts lease TTLs in whole seconds: ttl is rounded up, so grants
// may outlive the session's TTL by under a second, never the other way.
func (s *Store) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: session ttl %s must be positive", tenure.ErrInvalid, ttl)
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	g, err := s.c.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return nil, s.fail(ctx, "open a session (grant an etcd lease)", "", err)
	}
	return &session{s: s, id: g.ID, ttl: ttl, grants: map[string]tenure.Lease{},
		checked: g.ResponseHeader.GetRevision(), rewritten: map[string]bool{}}, nil
}

// session is a [tenure.StoreSession] on one etcd lease.
type session struct {
	s   *Store
	id  clientv3.LeaseID
	ttl time.Duration

	mu     sync.Mutex
	grants map[string]tenure.Lease // by holder key
	// checked is the etcd revision up to which every change to the holder
	// keys was compared with the grants (see changedSince); tracked counts
	// the grants added, so that a keep-alive does not move checked past
	// a grant added while it read (see track).
	checked int64
	tracked uint64
	// quietAt is the etcd revision at which the session was last checked
	// in full (see check); while etcd's revision stays there, nothing was
	// deleted or written and a keep-alive checks nothing.
	quietAt int64
	// rewritten holds the holder keys on the lease that were rewritten
	// from outside: no grant of the session's, but not strays to delete
	// either (see sweep). Forgotten once no longer attached.
	rewritten map[string]bool
}

// Acquire implements [tenure.StoreSession] with one transaction, the one
// [Store.Acquire] sends, creating the holder key on the session's lease.
// If the transaction's outcome is unknown, a holder key it may have made
// is deleted by the next keep-alive, which finds it attached to the lease
// but not granted.
func (ss *session) Acquire(ctx context.Context, key, identity, value string) (tenure.Lease, error) {
	s := ss.s
	c := tenure.Claim{Identity: identity, TTL: ss.ttl, Value: value}
	if err := ctxerr.Claim(ctx, s.closed.Load(), key, c); err != nil {
		return tenure.Lease{}, err
	}
	l, err := s.grantOn(ctx, key, c, ss.id, true, time.Now())
	if err != nil {
		return l, err
	}
	ss.track(l)
	return l, nil
}

// track adds grant l to the session's grants. A keep-alive may have read
// the holder keys changed after l's write while l was not among them yet:
// the next one reads them again from l's write on.
func (ss *session) track(l tenure.Lease) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.grants[ss.s.holderKey(l.Key)] = l
	ss.checked = min(ss.checked, int64(l.Term))
	ss.tracked++
}

// KeepAlive implements [tenure.StoreSession]. It sends the lease's
// keep-alive and, beside it, a TimeToLive without the attached keys,
// whose answer carries etcd's revision. Unless that revision moved since
// the last full check (a quiet etcd: keep-alives write nothing, and any
// delete or write of a holder key moves it), that is all; else it lists
// the keys attached to the lease and reads the holder keys changed since
// (see check).
func (ss *session) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	s := ss.s
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	probed := make(chan attached, 1)
	go func() { probed <- ss.timeToLive(ctx, false) }()
	kerr := s.keepAlive(ctx, ss.id)
	p := <-probed
	if err := ss.lost(ctx, kerr, p.err); err != nil {
		return nil, err
	}
	ss.mu.Lock()
	quiet, tracked := p.rev == ss.quietAt, ss.tracked
	ss.mu.Unlock()
	if quiet {
		return nil, nil
	}
	return ss.check(ctx, p.rev, tracked)
}

// attached are the keys attached to the session's lease, as TimeToLive
// listed them.
type attached struct {
	keys [][]byte
	rev  int64 // etcd's revision when they were listed
	err  error
}

// timeToLive asks for the session lease's TTL, and with keys for the
// keys attached to it.
func (ss *session) timeToLive(ctx context.Context, keys bool) attached {
	var opts []clientv3.LeaseOption
	if keys {
		opts = append(opts, clientv3.WithAttachedKeys())
	}
	r, err := ss.s.c.TimeToLive(ctx, ss.id, opts...)
	switch {
	case err != nil:
		return attached{err: err}
	case r.TTL < 0:
		return attached{err: errSessionGone}
	}
	return attached{keys: r.Keys, rev: r.ResponseHeader.GetRevision()}
}

// lost turns the errors of a keep-alive (kerr) and of a TimeToLive (terr)
// into KeepAlive's: ErrLost if the lease is gone.
func (ss *session) lost(ctx context.Context, kerr, terr error) error {
	s := ss.s
	switch {
	case errors.Is(terr, errSessionGone) || isLeaseNotFound(kerr) || isLeaseNotFound(terr):
		return fmt.Errorf("%w: the session's etcd lease expired or was revoked", tenure.ErrLost)
	case kerr != nil:
		return s.fail(ctx, "keep the session alive", "", kerr)
	case terr != nil:
		return s.fail(ctx, "ask for the session's TTL and keys", "", terr)
	}
	return nil
}

// check lists the keys attached to the session's lease and, at the same
// time, reads the holder keys changed since the last check (etcd's
// revision was rev after the keep-alive), and compares both with the
// grants (see sweep). If no grant was added since tracked, the session is
// then known to be checked up to the older of the two reads' revisions:
// the next keep-alive that finds etcd's revision still there checks
// nothing.
func (ss *session) check(ctx context.Context, rev int64, tracked uint64) ([]tenure.Lease, error) {
	listed := make(chan attached, 1)
	go func() { listed <- ss.timeToLive(ctx, true) }()
	ch, cerr := ss.changedSince(ctx, rev)
	a := <-listed
	if err := ss.lost(ctx, nil, a.err); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, ss.s.fail(ctx, "read the session's changed keys", "", cerr)
	}
	gone := ss.sweep(a.keys, ch)
	ss.mu.Lock()
	if ss.tracked == tracked {
		ss.quietAt = min(a.rev, ch.rev)
	}
	ss.mu.Unlock()
	return gone, nil
}

// changes are the holder keys changed between two revisions, as read
// with the session's tracked count then.
type changes struct {
	kvs     map[string]*mvccpb.KeyValue // without values
	rev     int64                       // read up to this revision
	tracked uint64
}

// changedSince returns the holder keys (without values) changed since the
// revision up to which the session checked them, and the revision they
// were read at; nothing, without a request, if etcd's revision rev has
// not moved since (an idle cluster: keep-alives write nothing).
func (ss *session) changedSince(ctx context.Context, rev int64) (changes, error) {
	ss.mu.Lock()
	ch := changes{rev: ss.checked, tracked: ss.tracked}
	ss.mu.Unlock()
	if rev <= ch.rev {
		return ch, nil
	}
	s := ss.s
	r, err := s.c.Get(ctx, s.holderKey(""), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithMinModRev(ch.rev+1))
	if err != nil {
		return changes{}, err
	}
	ch.kvs, ch.rev = make(map[string]*mvccpb.KeyValue, len(r.Kvs)), r.Header.GetRevision()
	for _, kv := range r.Kvs {
		ch.kvs[string(kv.Key)] = kv
	}
	return ch, nil
}

// isGrantKV reports whether holder key kv, read without its value (and
// its lease: keys-only reads leave it out, and TimeToLive's list of
// attached keys tells), is still grant l: created by the grant's own write
// and never written since.
func isGrantKV(kv *mvccpb.KeyValue, l tenure.Lease) bool {
	return kv.CreateRevision == int64(l.Term) && kv.ModRevision == int64(l.Term)
}

var errSessionGone = errors.New("session lease gone")

// sweep compares the keys attached to the lease, and the holder keys
// changed (ch), with the session's grants: it forgets and
// returns the grants whose holder key is no longer attached or was
// rewritten, and deletes in the background the attached keys that are no
// grant (an acquisition whose reply was lost) and were not rewritten from
// outside (those end with the session's lease).
func (ss *session) sweep(keys [][]byte, ch changes) []tenure.Lease {
	on := make(map[string]bool, len(keys))
	for _, k := range keys {
		on[string(k)] = true
	}
	ss.mu.Lock()
	if ss.tracked == ch.tracked { // else a grant came since: read from its write on
		ss.checked = max(ss.checked, ch.rev)
	}
	var gone []tenure.Lease
	for hk, l := range ss.grants {
		kv, ok := ch.kvs[hk]
		if !on[hk] || ok && !isGrantKV(kv, l) {
			gone = append(gone, l)
			delete(ss.grants, hk)
			if on[hk] {
				ss.rewritten[hk] = true
			}
		}
	}
	var strays []string
	for hk := range ss.rewritten {
		if !on[hk] {
			delete(ss.rewritten, hk)
		}
	}
	for hk := range on {
		if _, ok := ss.grants[hk]; !ok && !ss.rewritten[hk] {
			strays = append(strays, hk)
		}
	}
	ss.mu.Unlock()
	if len(strays) > 0 {
		go ss.deleteStrays(strays)
	}
	return gone
}

// deleteStrays deletes holder keys attached to the session's lease that
// no grant of the session knows, if they still are attached to it.
func (ss *session) deleteStrays(hks []string) {
	s := ss.s
	ctx, cancel := context.WithTimeout(s.bg, 5*time.Second)
	defer cancel()
	for _, hk := range hks {
		ss.mu.Lock()
		_, granted := ss.grants[hk]
		ss.mu.Unlock()
		if granted {
			continue // granted since the list was read
		}
		_, _ = s.c.Txn(ctx).
			If(clientv3.Compare(clientv3.LeaseValue(hk), "=", int64(ss.id))).
			Then(clientv3.OpDelete(hk)).
			Commit()
	}
}

// Release implements [tenure.StoreSession]: [Store.Release] without
// revoking the lease, which the session's other grants use.
func (ss *session) Release(ctx context.Context, l tenure.Lease) error {
	s := ss.s
	ss.mu.Lock()
	if cur, ok := ss.grants[s.holderKey(l.Key)]; ok && cur.Term == l.Term {
		delete(ss.grants, s.holderKey(l.Key))
	}
	ss.mu.Unlock()
	return s.Release(ctx, l)
}

// Close implements [tenure.StoreSession]: it revokes the session's etcd
// lease, deleting every holder key on it.
func (ss *session) Close(ctx context.Context) error {
	s := ss.s
	if err := s.usable(ctx); err != nil {
		return err
	}
	_, err := s.c.Revoke(ctx, ss.id)
	ss.mu.Lock()
	ss.grants = map[string]tenure.Lease{}
	ss.mu.Unlock()
	switch {
	case isLeaseNotFound(err):
		return fmt.Errorf("%w: the session's etcd lease had already ended", tenure.ErrLost)
	case err != nil:
		return s.fail(ctx, "close the session (revoke its etcd lease)", "", err)
	}
	return nil
}
