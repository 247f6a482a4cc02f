package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
)

// Acquire implements [tenure.Store] in two requests: it grants an etcd
// lease, then one transaction creates the holder key under it if the key is
// absent, or else reads who holds it (and the lease is revoked in the
// background). A held key's Remaining in the [tenure.HeldError] is the
// holder's granted TTL, an upper bound, so a refusal costs no third request.
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	if err := tenure.CheckAcquire(key, identity, ttl); err != nil {
		return tenure.Lease{}, err
	}
	if err := s.usable(ctx); err != nil {
		return tenure.Lease{}, err
	}
	g, err := s.c.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return tenure.Lease{}, s.fail(ctx, "acquire (grant an etcd lease)", key, err)
	}
	hk, tk, val := s.holderKey(key), s.termKey(key), encode(identity, ttl)
	resp, err := s.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(hk), "=", 0)).
		Then(clientv3.OpPut(hk, val, clientv3.WithLease(g.ID)), clientv3.OpPut(tk, val)).
		Else(clientv3.OpGet(hk), clientv3.OpGet(tk)).
		Commit()
	if err != nil {
		// The transaction may or may not have been applied; revoking the
		// lease undoes it if it was, and frees the lease if it was not.
		go s.revoke(g.ID)
		return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
	}
	if !resp.Succeeded {
		go s.revoke(g.ID)
		return tenure.Lease{}, &tenure.HeldError{Record: heldRecord(key, kvOf(resp.Responses[0]), kvOf(resp.Responses[1]))}
	}
	l := tenure.Lease{
		Key:      key,
		Identity: identity,
		Term:     uint64(resp.Header.Revision),
		TTL:      ttl,
		Token:    strconv.FormatInt(int64(g.ID), 16),
	}
	s.grants.Store(g.ID, l)
	return l, nil
}

// heldRecord is the record of a key read inside a transaction, with the
// holder's granted TTL as its Remaining (an upper bound; no extra request).
func heldRecord(key string, holder, term *mvccpb.KeyValue) tenure.Record {
	r := tenure.Record{Key: key}
	if term != nil {
		r.Term = uint64(term.ModRevision)
	}
	if holder == nil {
		return r
	}
	g := decode(holder.Value)
	r.Holder, r.Term, r.TTL = g.Holder, uint64(holder.CreateRevision), time.Duration(g.TTL)
	if r.Holder == "" {
		r.Holder = unknownHolder
	}
	r.Remaining = time.Duration(ttlSeconds(r.TTL)) * time.Second
	return r
}

// revoke ends an etcd lease no grant uses, in the background, bounded by
// the store's lifetime. If it fails the lease simply expires.
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(s.bg, 5*time.Second)
	defer cancel()
	_, _ = s.c.Revoke(ctx, id)
}

// Renew implements [tenure.Store] by keeping l's etcd lease alive once,
// which restarts its TTL on the etcd leader.
//
// A grant this handle made needs nothing more: its holder key is attached
// to its own etcd lease, and tenure ends a grant only by revoking that
// lease (expiry or Release), which deletes the key with it, and creates a
// holder key only where none exists. So while the lease lives, the key is
// still this grant. (Keys written under the store's prefix by anything but
// tenure void this reasoning: the prefix must be tenure's alone.) A lease
// from elsewhere (another handle, a forged copy) is first checked against
// the holder key.
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	if err := tenure.CheckKey(l.Key); err != nil {
		return err
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	var id clientv3.LeaseID
	if raw, err := strconv.ParseInt(l.Token, 16, 64); err == nil {
		if own, ok := s.grants.Load(clientv3.LeaseID(raw)); ok && own.(tenure.Lease) == l {
			id = clientv3.LeaseID(raw)
		}
	}
	if id == 0 {
		var err error
		if id, err = s.current(ctx, l); err != nil {
			return err
		}
	}
	if err := s.keepAlive(ctx, id); err != nil {
		if isLeaseNotFound(err) {
			s.grants.Delete(id)
			return fmt.Errorf("%w: key %q term %d: its etcd lease expired", tenure.ErrLost, l.Key, l.Term)
		}
		return s.fail(ctx, "renew", l.Key, err)
	}
	return nil
}

// current returns l's etcd lease ID if the holder key is l's grant, or an
// error matching ErrLost if it is not.
func (s *Store) current(ctx context.Context, l tenure.Lease) (clientv3.LeaseID, error) {
	id, err := strconv.ParseInt(l.Token, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: key %q term %d: not a lease of an etcd store", tenure.ErrLost, l.Key, l.Term)
	}
	resp, err := s.c.Get(ctx, s.holderKey(l.Key))
	if err != nil {
		return 0, s.fail(ctx, "renew", l.Key, err)
	}
	if len(resp.Kvs) == 0 {
		return 0, fmt.Errorf("%w: key %q term %d expired or was released", tenure.ErrLost, l.Key, l.Term)
	}
	kv := resp.Kvs[0]
	if uint64(kv.CreateRevision) != l.Term || kv.Lease != id || string(kv.Value) != encode(l.Identity, l.TTL) {
		return 0, fmt.Errorf("%w: key %q term %d was superseded by term %d", tenure.ErrLost, l.Key, l.Term, kv.CreateRevision)
	}
	return clientv3.LeaseID(id), nil
}

// Release implements [tenure.Store]: l's etcd lease is revoked, which
// deletes the holder key with it. A grant made through this Store needs
// nothing more (see Renew); for a lease from elsewhere one transaction
// first checks that the holder key is still l's grant. A grant never ends any other way, which is what
// lets Renew trust a live lease (see Renew). Nothing else can change the
// key between the check and the revocation: only the lease's end removes
// it, and nobody creates a holder key while one exists.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	if err := tenure.CheckKey(l.Key); err != nil {
		return err
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	raw, err := strconv.ParseInt(l.Token, 16, 64)
	if err != nil {
		return fmt.Errorf("%w: key %q term %d: not a lease of an etcd store", tenure.ErrLost, l.Key, l.Term)
	}
	id := clientv3.LeaseID(raw)
	if own, ok := s.grants.Load(id); ok && own.(tenure.Lease) == l {
		// This handle's own grant: its live lease is the grant (see
		// Renew), so revoking it is the whole release, one round trip.
		return s.revokeGrant(ctx, l, id)
	}
	hk := s.holderKey(l.Key)
	resp, err := s.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(hk), "=", int64(l.Term)),
			clientv3.Compare(clientv3.LeaseValue(hk), "=", int64(id)),
			clientv3.Compare(clientv3.Value(hk), "=", encode(l.Identity, l.TTL))).
		Commit()
	if err != nil {
		return s.fail(ctx, "release", l.Key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: key %q term %d expired, was released or was superseded", tenure.ErrLost, l.Key, l.Term)
	}
	return s.revokeGrant(ctx, l, id)
}

// revokeGrant ends grant l by revoking its etcd lease, which deletes the
// holder key with it.
func (s *Store) revokeGrant(ctx context.Context, l tenure.Lease, id clientv3.LeaseID) error {
	if _, err := s.c.Revoke(ctx, id); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.grants.Delete(id)
			return fmt.Errorf("%w: key %q term %d expired before it was released", tenure.ErrLost, l.Key, l.Term)
		}
		return s.fail(ctx, "release", l.Key, err)
	}
	s.grants.Delete(id)
	return nil
}

// Get implements [tenure.Store]. It reads the holder and term keys in one
// transaction and, if the key is held, asks etcd how long the lease lives.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return tenure.Record{}, err
	}
	if err := s.usable(ctx); err != nil {
		return tenure.Record{}, err
	}
	r, _, err := s.read(ctx, key)
	if err != nil {
		return tenure.Record{}, s.fail(ctx, "get", key, err)
	}
	return r, nil
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
			r.Term = uint64(term.ModRevision)
		}
		return r, nil
	}
	g := decode(holder.Value)
	r.Holder, r.Term, r.TTL = g.Holder, uint64(holder.CreateRevision), time.Duration(g.TTL)
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
