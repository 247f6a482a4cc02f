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

// Acquire implements [tenure.Store]. It reads the key first, so a held key
// costs one read and no etcd lease; a free key costs a lease grant and one
// transaction that creates the holder key only if it is still absent.
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	if err := tenure.CheckAcquire(key, identity, ttl); err != nil {
		return tenure.Lease{}, err
	}
	if err := s.usable(ctx); err != nil {
		return tenure.Lease{}, err
	}
	for {
		r, _, err := s.read(ctx, key)
		if err != nil {
			return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
		}
		if r.Held() {
			return tenure.Lease{}, &tenure.HeldError{Record: r}
		}
		l, err := s.tryAcquire(ctx, key, identity, ttl)
		if errors.Is(err, errRace) {
			continue // read who won, or try again if they are already gone
		}
		return l, err
	}
}

// errRace reports that another candidate created the holder key first.
var errRace = errors.New("lost the race for the holder key")

// tryAcquire grants an etcd lease and creates the holder key under it if
// the key is still absent.
func (s *Store) tryAcquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	g, err := s.c.Grant(ctx, ttlSeconds(ttl))
	if err != nil {
		return tenure.Lease{}, s.fail(ctx, "acquire (grant an etcd lease)", key, err)
	}
	hk, tk, val := s.holderKey(key), s.termKey(key), encode(identity, ttl)
	resp, err := s.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(hk), "=", 0)).
		Then(clientv3.OpPut(hk, val, clientv3.WithLease(g.ID)), clientv3.OpPut(tk, val)).
		Commit()
	if err != nil {
		// The transaction may or may not have been applied; revoking the
		// lease undoes it if it was, and frees the lease if it was not.
		go s.revoke(g.ID)
		return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
	}
	if !resp.Succeeded {
		go s.revoke(g.ID)
		return tenure.Lease{}, errRace
	}
	return tenure.Lease{
		Key:      key,
		Identity: identity,
		Term:     uint64(resp.Header.Revision),
		TTL:      ttl,
		Token:    strconv.FormatInt(int64(g.ID), 16),
	}, nil
}

// revoke ends an etcd lease no grant uses, in the background, bounded by
// the store's lifetime. If it fails the lease simply expires.
func (s *Store) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(s.bg, 5*time.Second)
	defer cancel()
	_, _ = s.c.Revoke(ctx, id)
}

// Renew implements [tenure.Store]: it checks that the holder key still
// belongs to l, then keeps l's etcd lease alive once, which restarts its
// TTL on the etcd leader.
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	if err := tenure.CheckKey(l.Key); err != nil {
		return err
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	id, err := s.current(ctx, l)
	if err != nil {
		return err
	}
	if _, err := s.c.KeepAliveOnce(ctx, id); err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
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

// Release implements [tenure.Store]: one transaction deletes the holder key
// if it is still l's grant, then l's etcd lease is revoked.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	if err := tenure.CheckKey(l.Key); err != nil {
		return err
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	id, err := strconv.ParseInt(l.Token, 16, 64)
	if err != nil {
		return fmt.Errorf("%w: key %q term %d: not a lease of an etcd store", tenure.ErrLost, l.Key, l.Term)
	}
	hk := s.holderKey(l.Key)
	resp, err := s.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(hk), "=", int64(l.Term)),
			clientv3.Compare(clientv3.LeaseValue(hk), "=", id),
			clientv3.Compare(clientv3.Value(hk), "=", encode(l.Identity, l.TTL))).
		Then(clientv3.OpDelete(hk)).
		Commit()
	if err != nil {
		return s.fail(ctx, "release", l.Key, err)
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: key %q term %d expired, was released or was superseded", tenure.ErrLost, l.Key, l.Term)
	}
	// The grant has ended; the lease has nothing attached any more.
	if _, err := s.c.Revoke(ctx, clientv3.LeaseID(id)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) && ctx.Err() == nil {
		go s.revoke(clientv3.LeaseID(id))
	}
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
