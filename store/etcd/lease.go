package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
)

// Acquire implements [tenure.Store] in two requests: it grants an etcd
// lease, then one transaction creates the holder key under it if the key is
// absent (reading the term key's record of the last grant first), or else
// reads who holds it (and the lease is revoked in the background). A held
// key's Remaining in the [tenure.HeldError] is the holder's granted TTL, an
// upper bound, so a refusal costs no third request.
//
// When the last grant ended without release and its etcd lease still
// lives, its holder key was deleted from outside: the new grant's Wait
// covers what is left of that lease (asked with one more request, only
// after a grant that was not released), and the orphaned lease is revoked.
// When the term key is gone although this handle saw the key granted, the
// Wait is the TTL of the last grant it saw.
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Store.Acquire], keeping
// c.Value in the holder key's value, so it ends with the grant's etcd
// lease.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	if err := ctxerr.Claim(ctx, s.closed.Load(), key, c); err != nil {
		return tenure.Lease{}, err
	}
	sent := time.Now()
	g, err := s.c.Grant(ctx, ttlSeconds(c.TTL))
	if err != nil {
		return tenure.Lease{}, s.fail(ctx, "acquire (grant an etcd lease)", key, err)
	}
	l, err := s.grantOn(ctx, key, c, g.ID, false, sent)
	if err != nil {
		// On a failed transaction the grant may or may not have been made;
		// revoking the lease undoes it if it was, and frees the lease if
		// it was not. A held key leaves the lease unused.
		go s.revoke(g.ID)
	}
	return l, err
}

// grantOn is the transaction of an acquisition: it creates key's holder
// key under etcd lease id if the key is free, recording the grant in the
// term key, or returns a *tenure.HeldError. shared marks a session's lease,
// which other grants use too, so that nobody revokes it for this grant's
// sake. sent is when the acquisition began, from which a Wait counts.
func (s *Store) grantOn(ctx context.Context, key string, c tenure.Claim, id clientv3.LeaseID, shared bool, sent time.Time) (tenure.Lease, error) {
	// What this handle saw before asking: its watch may see the new grant
	// before the reply is read.
	before := s.seen.Highest(key)
	cmp, then, els := s.grantOps(key, c, id, shared)
	resp, err := s.c.Txn(ctx).If(cmp...).Then(then...).Else(els...).Commit()
	if err != nil {
		return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
	}
	a := granting{key: key, c: c, id: id, shared: shared, sent: sent, before: before,
		ok: resp.Succeeded, res: resp.Responses, rev: resp.Header.Revision}
	s.repairLeaseless(ctx, a)
	return s.granted(a, func(prev *mvccpb.KeyValue) time.Duration { return s.vanishedWait(ctx, sent, prev, before.TTL) })
}

// repairLeaseless puts the holder key back under a lease (expireLeaseless)
// if a's transaction found the key held by a holder key without one.
func (s *Store) repairLeaseless(ctx context.Context, a granting) {
	if hk := kvOf(a.res[0]); !a.ok && hk != nil && hk.Lease == 0 {
		s.expireLeaseless(ctx, a.key, hk, a.c.TTL)
	}
}

// expireLeaseless puts key's holder key hk, which has no etcd lease, back
// under a lease of its own: the TTL it records, or ttl if that is not one
// tenure grants. tenure writes every holder key under a lease, but a plain
// etcdctl put on one (an operator fixing its value) detaches it, and it
// would then never expire: once its holder stopped (its Renew reports the
// grant lost), no candidate could take the key. Its value and term (its
// CreateRevision) are kept; a put of anything else since it was read wins.
// Failures leave it as it was, for the next Acquire to try again.
func (s *Store) expireLeaseless(ctx context.Context, key string, hk *mvccpb.KeyValue, ttl time.Duration) {
	if d := time.Duration(decode(hk.Value).TTL); d >= tenure.MinTTL && d <= tenure.MaxTTL {
		ttl = d
	}
	g, err := s.c.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return
	}
	hkey := s.holderKey(key)
	resp, err := s.c.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(hkey), "=", hk.ModRevision)).
		Then(clientv3.OpPut(hkey, string(hk.Value), clientv3.WithLease(g.ID))).
		Commit()
	if err != nil || !resp.Succeeded {
		go s.revoke(g.ID)
	}
}

// grantOps are the comparison and the operations of grantOn's transaction.
func (s *Store) grantOps(key string, c tenure.Claim, id clientv3.LeaseID, shared bool) (cmp []clientv3.Cmp, then, els []clientv3.Op) {
	hk, tk, val := s.holderKey(key), s.termKey(key), encode(c.Identity, c.TTL, c.Value)
	last := encodeLast(grant{Holder: c.Identity, TTL: int64(c.TTL), Lease: int64(id), Shared: shared})
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(hk), "=", 0)},
		[]clientv3.Op{clientv3.OpGet(tk), clientv3.OpPut(hk, val, clientv3.WithLease(id)), clientv3.OpPut(tk, last)},
		[]clientv3.Op{clientv3.OpGet(hk), clientv3.OpGet(tk)}
}

// granting is the answer of grantOps' transaction, with what was known
// when it was sent.
type granting struct {
	key    string
	c      tenure.Claim
	id     clientv3.LeaseID
	shared bool
	sent   time.Time
	before seen.Grant // the highest grant of key this handle had seen
	ok     bool       // the comparison held: the key was granted
	res    []*etcdserverpb.ResponseOp
	rev    int64 // the transaction's revision
}

// granted turns a into the lease granted (its Wait judged by wait from
// the last grant's term key), an adopted grant of the session's own, or
// the holder's *HeldError.
func (s *Store) granted(a granting, wait func(prev *mvccpb.KeyValue) time.Duration) (tenure.Lease, error) {
	if !a.ok {
		if l, ok := adopt(a.key, a.c.Identity, a.id, a.shared, kvOf(a.res[0])); ok {
			return l, nil
		}
		r := heldRecord(a.key, kvOf(a.res[0]), kvOf(a.res[1]))
		s.seen.Observe(a.key, r.Term, r.TTL)
		return tenure.Lease{}, &tenure.HeldError{Record: r}
	}
	l := tenure.Lease{
		Key:      a.key,
		Identity: a.c.Identity,
		Term:     uint64(a.rev),
		TTL:      a.c.TTL,
		Token:    leaseToken(a.id, a.shared),
		Value:    a.c.Value,
	}
	l.Wait = wait(kvOf(a.res[0]))
	s.seen.Observe(a.key, l.Term, a.c.TTL)
	return l, nil
}

// adopt returns the grant that holder key kv records if a session on
// etcd lease id made it to identity: an earlier Acquire whose reply was
// lost.
func adopt(key, identity string, id clientv3.LeaseID, shared bool, kv *mvccpb.KeyValue) (tenure.Lease, bool) {
	if !shared || kv == nil || clientv3.LeaseID(kv.Lease) != id {
		return tenure.Lease{}, false
	}
	g := decode(kv.Value)
	if g.Holder != identity {
		return tenure.Lease{}, false
	}
	return tenure.Lease{Key: key, Identity: identity, Term: uint64(kv.CreateRevision), TTL: time.Duration(g.TTL),
		Token: leaseToken(id, true), Value: g.Value}, true
}

// vanishedWait returns the Wait of a grant that follows the one term key
// prev (nil if absent) records: zero if it was released or its etcd lease
// ended (expiry, which already waited the TTL out; a lease revoked from
// outside looks the same), what is left of its lease if the lease lives
// though its holder key is gone, and the TTL of the last grant this handle
// saw before it asked (seenTTL) if the term key is gone.
func (s *Store) vanishedWait(ctx context.Context, sent time.Time, prev *mvccpb.KeyValue, seenTTL time.Duration) time.Duration {
	return s.vanishedWaitBy(sent, prev, seenTTL, func(id clientv3.LeaseID) (*clientv3.LeaseTimeToLiveResponse, error) {
		return s.c.TimeToLive(ctx, id)
	})
}

// vanishedWaitBy is vanishedWait with the old lease's TimeToLive asked
// through ttlOf, which a batch shares among its keys.
func (s *Store) vanishedWaitBy(sent time.Time, prev *mvccpb.KeyValue, seenTTL time.Duration,
	ttlOf func(clientv3.LeaseID) (*clientv3.LeaseTimeToLiveResponse, error)) time.Duration {
	if prev == nil {
		return seen.WaitSince(sent, seenTTL)
	}
	g := decode(prev.Value)
	if g.Released || g.Lease == 0 {
		return 0
	}
	old := clientv3.LeaseID(g.Lease)
	ttl, err := ttlOf(old)
	switch {
	case err != nil:
		return seen.WaitSince(sent, time.Duration(g.TTL)) // cannot tell: assume the worst
	case ttl.TTL < 0:
		return 0 // expired (or revoked)
	}
	if !g.Shared {
		go s.revoke(old) // nothing uses it: its holder key is gone
	}
	// TimeToLive truncates to whole seconds; the old holder's own renew
	// deadline is at most its TTL past its last renewal.
	return seen.WaitSince(sent, min(time.Duration(ttl.TTL+1)*time.Second, time.Duration(g.TTL)))
}

// heldRecord is the record of a key read inside a transaction, with the
// holder's granted TTL as its Remaining (an upper bound; no extra request).
func heldRecord(key string, holder, term *mvccpb.KeyValue) tenure.Record {
	r := tenure.Record{Key: key}
	if term != nil {
		r.Term = lastTerm(term)
	}
	if holder == nil {
		return r
	}
	g := decode(holder.Value)
	r.Holder, r.Term, r.TTL, r.Value = g.Holder, uint64(holder.CreateRevision), time.Duration(g.TTL), g.Value
	if r.Holder == "" {
		r.Holder = unknownHolder
	}
	r.Remaining = time.Duration(ttlSeconds(r.TTL)) * time.Second
	if r.TTL < 0 || r.Remaining < r.TTL { // a TTL written from outside: negative, or too long to round up
		r.TTL, r.Remaining = max(r.TTL, 0), max(r.TTL, 0)
	}
	return r
}

// revoke ends an etcd lease no grant uses, in the background, bounded by
// the store's lifetime. If it fails the lease simply expires.
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(s.bg, 5*time.Second)
	defer cancel()
	_, _ = s.c.Revoke(ctx, id)
}

// leaseOf returns l's etcd lease and whether a session shares it, after
// the checks that Renew and Release make first: a valid key and a usable
// store. The error matches ErrLost if l's token is not an etcd lease.
func (s *Store) leaseOf(ctx context.Context, l tenure.Lease) (clientv3.LeaseID, bool, error) {
	if err := tenure.CheckKey(l.Key); err != nil {
		return 0, false, err
	}
	if err := s.usable(ctx); err != nil {
		return 0, false, err
	}
	tok, shared := strings.CutPrefix(l.Token, sharedPrefix)
	id, err := strconv.ParseInt(tok, 16, 64)
	if err != nil || id == 0 {
		return 0, false, fmt.Errorf("%w: key %q term %d: not a lease of an etcd store", tenure.ErrLost, l.Key, l.Term)
	}
	return clientv3.LeaseID(id), shared, nil
}

// sharedPrefix starts the token of a grant on a session's etcd lease.
const sharedPrefix = "s:"

// leaseToken is the Lease.Token of a grant on etcd lease id.
func leaseToken(id clientv3.LeaseID, shared bool) string {
	t := strconv.FormatInt(int64(id), 16)
	if shared {
		return sharedPrefix + t
	}
	return t
}

// isGrant compares the holder key with grant l on etcd lease id.
func (s *Store) isGrant(l tenure.Lease, id clientv3.LeaseID) []clientv3.Cmp {
	hk := s.holderKey(l.Key)
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(hk), "=", int64(l.Term)),
		clientv3.Compare(clientv3.LeaseValue(hk), "=", int64(id)),
		clientv3.Compare(clientv3.Value(hk), "=", encode(l.Identity, l.TTL, l.Value)),
	}
}

// Renew implements [tenure.Store] with two requests sent together, so it
// costs one round trip: a keep-alive of l's etcd lease on the store's
// keep-alive stream, which restarts its TTL on the etcd leader, and a
// transaction that only compares the holder key with l (its revision, etcd
// lease and value). If the holder key is gone or is not l's grant (deleted
// or rewritten by something other than tenure, or a forged lease) or the
// etcd lease ended, Renew returns an error matching [tenure.ErrLost].
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	id, _, err := s.leaseOf(ctx, l)
	if err != nil {
		return err
	}
	checked := make(chan error, 1)
	go func() {
		resp, err := s.c.Txn(ctx).If(s.isGrant(l, id)...).Commit()
		switch {
		case err != nil:
			checked <- s.fail(ctx, "renew", l.Key, err)
		case !resp.Succeeded:
			checked <- fmt.Errorf("%w: key %q term %d: the holder key is gone or is not this grant (expired, released, superseded, or deleted or rewritten from outside)", tenure.ErrLost, l.Key, l.Term)
		default:
			checked <- nil
		}
	}()
	kerr := s.keepAlive(ctx, id)
	cerr := <-checked
	switch {
	case cerr != nil && errors.Is(cerr, tenure.ErrLost):
		return cerr
	case kerr != nil && isLeaseNotFound(kerr):
		return fmt.Errorf("%w: key %q term %d: its etcd lease expired or was revoked", tenure.ErrLost, l.Key, l.Term)
	case kerr != nil:
		return s.fail(ctx, "renew", l.Key, kerr)
	}
	return cerr
}

// Release implements [tenure.Store]: one transaction checks that the
// holder key is still l's grant, deletes it and records in the term key
// that the grant was released; then l's etcd lease is revoked (it holds
// nothing any more, so if that fails it simply expires). Watchers see the
// release after the first request.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	id, shared, err := s.leaseOf(ctx, l)
	if err != nil {
		return err
	}
	last := encodeLast(grant{Holder: l.Identity, TTL: int64(l.TTL), Lease: int64(id), Term: int64(l.Term), Released: true, Shared: shared})
	resp, err := s.c.Txn(ctx).
		If(s.isGrant(l, id)...).
		Then(clientv3.OpDelete(s.holderKey(l.Key)), clientv3.OpPut(s.termKey(l.Key), last)).
		Commit()
	if err != nil {
		return s.fail(ctx, "release", l.Key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: key %q term %d expired, was released or was superseded", tenure.ErrLost, l.Key, l.Term)
	}
	if !shared {
		_, _ = s.c.Revoke(ctx, id)
	}
	return nil
}

// Get implements [tenure.Store]. It reads the holder and term keys in one
// transaction and, if the key is held, asks etcd how long the lease lives.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return tenure.Record{}, err
	}
	r, _, err := s.read(ctx, key)
	if err != nil {
		return tenure.Record{}, s.fail(ctx, "get", key, err)
	}
	return s.seen.Record(r), nil
}

// read returns the key's record and the etcd revision it was read at.
func (s *Store) read(ctx context.Context, key string) (tenure.Record, int64, error) {
	for attempt := 0; ; attempt++ {
		resp, err := s.c.Txn(ctx).Then(clientv3.OpGet(s.holderKey(key)), clientv3.OpGet(s.termKey(key))).Commit()
		if err != nil {
			return tenure.Record{}, 0, err
		}
		r, err := s.record(ctx, key, kvOf(resp.Responses[0]), kvOf(resp.Responses[1]))
		if errors.Is(err, errGone) && attempt < 10 {
			continue // the lease ended after the read: read again
		}
		return r, resp.Header.Revision, err
	}
}

// errGone reports a holder key whose lease ended after it was read.
var errGone = errors.New("lease ended")

// record builds the key's record from its holder and term keys (either may
// be nil), asking etcd for the remaining TTL of a held key.
func (s *Store) record(ctx context.Context, key string, holder, term *mvccpb.KeyValue) (tenure.Record, error) {
	r := tenure.Record{Key: key}
	if holder == nil {
		if term != nil {
			r.Term = lastTerm(term)
		}
		return r, nil
	}
	g := decode(holder.Value)
	r.Holder, r.Term, r.TTL, r.Value = g.Holder, uint64(holder.CreateRevision), time.Duration(g.TTL), g.Value
	if r.Holder == "" {
		r.Holder = unknownHolder // held, but the key was not written by tenure
	}
	if holder.Lease == 0 {
		return r, nil // written without a lease, not by tenure: no expiry
	}
	ttl, err := s.c.TimeToLive(ctx, clientv3.LeaseID(holder.Lease))
	if err != nil {
		return tenure.Record{}, err
	}
	if ttl.TTL < 0 {
		return tenure.Record{}, errGone
	}
	// TimeToLive truncates to whole seconds, so the lease has less than
	// TTL+1 s left, and never more than it was granted.
	r.Remaining = min(time.Duration(ttl.TTL+1)*time.Second, time.Duration(ttl.GrantedTTL)*time.Second)
	return r, nil
}

// kvOf returns the key-value of a transaction's Get response, or nil.
func kvOf(op *etcdserverpb.ResponseOp) *mvccpb.KeyValue {
	if rr := op.GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
		return rr.Kvs[0]
	}
	return nil
}
