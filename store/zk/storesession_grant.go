package zk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxwait"
	"github.com/tenurehq/tenure/internal/seen"
)

// undoTimeout bounds the clean-up of a grant whose acquisition failed
// half-way.
const undoTimeout = 5 * time.Second

// Acquire implements [tenure.StoreSession] as [Store.AcquireClaim] does,
// over the session's connection: a read of the key node (a held key costs
// only that), then one multi-operation that creates the lease node and the
// grant's marker as ephemeral nodes of the session. Two more reads, sent
// together, set the watches that tell the session when the grant's nodes
// change (see KeepAlive). The lease's TTL is the session's. An ended
// session gives an error matching [tenure.ErrLost]. Acquires of one key in
// one session run one at a time.
func (ss *storeSession) Acquire(ctx context.Context, key, identity, value string) (tenure.Lease, error) {
	c := tenure.Claim{Identity: identity, TTL: ss.ttl, Value: value}
	if err := tenure.CheckClaim(key, c); err != nil {
		return tenure.Lease{}, err
	}
	if err := ss.usable(ctx); err != nil {
		return tenure.Lease{}, err
	}
	release, err := ss.slot(ctx)
	if err != nil {
		return tenure.Lease{}, ss.fail(ctx, "acquire", key, err)
	}
	defer release()
	unlock, err := ss.lockKey(ctx, key)
	if err != nil {
		return tenure.Lease{}, ss.fail(ctx, "acquire", key, err)
	}
	defer unlock()
	held := func(n node, sent time.Time) (tenure.Lease, bool, error) {
		return ss.adopt(ctx, key, c, n, sent)
	}
	return ss.s.acquireFree(ctx, ss.conn, key, held, func(n node, sent time.Time) (tenure.Lease, error) {
		return ss.tryAcquire(ctx, key, c, n, sent)
	})
}

// adopt takes up a grant of c that this session holds without tracking it,
// which key node n shows: one whose Acquire failed (a timeout, say) after
// ZooKeeper may have made the grant, and that undo did not delete yet. Its
// Wait is judged as that Acquire would have, from the key node it read
// (the session's TTL if that is unknown). It reports false for any other
// holder.
func (ss *storeSession) adopt(ctx context.Context, key string, c tenure.Claim, n node, sent0 time.Time) (tenure.Lease, bool, error) {
	rec := decode(n.data)
	if rec.Session != ss.id || rec.Holder != c.Identity || rec.Value != c.Value || time.Duration(rec.TTL) != c.TTL || ss.tracks(key) {
		return tenure.Lease{}, false, nil
	}
	wait := seen.WaitSince(sent0, c.TTL)
	if u, ok := ss.recall(key); ok {
		select {
		case alive := <-ss.s.lastAlive(ss.conn, ss.id, key, u.prev):
			wait = waitAfter(u.prev, alive, u.floor, c.TTL, sent0)
		case <-ctx.Done():
			ss.remember(key, u)
			return tenure.Lease{}, false, ss.fail(ctx, "acquire", key, ctx.Err())
		}
	}
	term := uint64(n.st.Mzxid)
	l := tenure.Lease{Key: key, Identity: c.Identity, Term: term, TTL: c.TTL,
		Token: fmt.Sprintf("%x.%x", ss.id, term), Value: c.Value, Wait: wait}
	sg := &sessionGrant{lease: l, version: n.st.Version}
	if err := ss.track(sg); err != nil {
		return tenure.Lease{}, false, err
	}
	if err := ss.watch(ctx, sg); err != nil || ss.isGone(sg) {
		ss.untrack(sg)
		if err != nil {
			return tenure.Lease{}, false, ss.fail(ctx, "acquire (watch the grant)", key, err)
		}
		return tenure.Lease{}, false, nil
	}
	ss.s.seen.Observe(key, term, c.TTL)
	return l, true, nil
}

// unsure is what an Acquire whose answer was lost knew before it sent its
// request, for adopt to judge the Wait as it would have.
type unsure struct {
	prev  node       // the key node it read
	floor seen.Grant // the highest grant of the key the store had seen
}

// remember keeps what an Acquire of key whose answer was lost knew.
func (ss *storeSession) remember(key string, u unsure) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.unsure == nil {
		ss.unsure = map[string]unsure{}
	}
	ss.unsure[key] = u
}

// recall returns and forgets what remember kept for key.
func (ss *storeSession) recall(key string) (unsure, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	n, ok := ss.unsure[key]
	delete(ss.unsure, key)
	return n, ok
}

// isGone reports whether a watch saw sg's nodes change.
func (ss *storeSession) isGone(sg *sessionGrant) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return sg.gone
}

// tryAcquire creates the grant's nodes if the key node is still as prev
// read it (else errRace), and watches them.
func (ss *storeSession) tryAcquire(ctx context.Context, key string, c tenure.Claim, prev node, sent0 time.Time) (tenure.Lease, error) {
	s := ss.s
	u := unsure{prev: prev, floor: s.seen.Highest(key)}
	p, err := s.grantNodes(ctx, ss.conn, ss.id, key, c, prev, sent0)
	switch {
	case errors.Is(err, errRace):
		return tenure.Lease{}, err
	case err != nil:
		if p.unsure { // the grant may have been made, and its answer lost
			ss.remember(key, u)
			ss.undo(key)
		}
		return tenure.Lease{}, ss.fail(ctx, "acquire", key, err)
	}
	l := tenure.Lease{Key: key, Identity: c.Identity, Term: p.term, TTL: c.TTL,
		Token: fmt.Sprintf("%x.%x", ss.id, p.term), Value: c.Value, Wait: p.wait}
	s.seen.Observe(key, l.Term, c.TTL)
	sg := &sessionGrant{lease: l, version: p.version, czxid: p.czxid}
	if err := ss.track(sg); err != nil {
		return tenure.Lease{}, err // the grant ended with the session
	}
	if err := ss.watch(ctx, sg); err != nil {
		ss.untrack(sg)
		ss.remember(key, u)
		ss.undo(key)
		return tenure.Lease{}, ss.fail(ctx, "acquire (watch the grant)", key, err)
	}
	return l, nil
}

// track adds sg to the session's grants, before its watches are set so
// that no event is missed. A gone grant it replaces (of the same key, not
// yet reported) is reported by the next KeepAlive.
func (ss *storeSession) track(sg *sessionGrant) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if isClosed(ss.ended) {
		return fmt.Errorf("%w: the ZooKeeper session ended: %s", tenure.ErrLost, ss.why)
	}
	kp := ss.s.keyPath(sg.lease.Key)
	if old := ss.grants[kp]; old != nil {
		old.unfollowLocked()
		ss.orphans = append(ss.orphans, old.lease)
		delete(ss.pending, old)
	}
	ss.grants[kp] = sg
	return nil
}

// untrack forgets sg.
func (ss *storeSession) untrack(sg *sessionGrant) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	kp := ss.s.keyPath(sg.lease.Key)
	if ss.grants[kp] == sg {
		sg.unfollowLocked()
		delete(ss.grants, kp)
	}
	delete(ss.pending, sg)
}

// watch sets a data watch on sg's key node (it fires when the node is
// rewritten or deleted) and one on its lease node (when it is deleted),
// over the session's connection, and marks sg gone if its nodes already
// changed. The session's event callback marks it gone when they fire.
func (ss *storeSession) watch(ctx context.Context, sg *sessionGrant) error {
	l := sg.lease
	type result struct {
		ok  bool
		st  *zk.Stat
		err error
	}
	lease := make(chan result, 1)
	go func() { // both requests in one round trip
		ok, st, err := callExists(ctx, ss.conn, ss.s.leasePath(l.Key))
		lease <- result{ok, st, err}
	}()
	kst, err := call(ctx, func() (*zk.Stat, error) {
		_, st, _, err := ss.conn.GetW(ss.s.keyPath(l.Key))
		return st, err
	})
	lr := <-lease
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	ok, lst, err := lr.ok, lr.st, lr.err
	if err != nil {
		return err
	}
	if kst == nil || uint64(kst.Mzxid) != l.Term || kst.Version != sg.version || !ok || lst.EphemeralOwner != ss.id {
		ss.mu.Lock()
		if ss.grants[ss.s.keyPath(l.Key)] == sg {
			ss.markGoneLocked(sg)
		}
		ss.mu.Unlock()
	}
	return nil
}

// callExists is conn.ExistsW bounded by ctx.
func callExists(ctx context.Context, conn *zk.Conn, p string) (bool, *zk.Stat, error) {
	type result struct {
		ok bool
		st *zk.Stat
	}
	r, err := call(ctx, func() (result, error) {
		ok, st, _, err := conn.ExistsW(p)
		return result{ok, st}, err
	})
	return r.ok, r.st, err
}

// undo deletes, in the background, key's grant if it is this session's
// and the session does not track it: a grant whose acquisition failed
// after the request may have been applied. Without it, the grant would
// hold the key until the session ends.
func (ss *storeSession) undo(key string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
		defer cancel()
		unlock, err := ss.lockKey(ctx, key)
		if err != nil {
			return
		}
		defer unlock()
		kst, err := call(ctx, func() (*zk.Stat, error) {
			_, st, err := ss.conn.Exists(ss.s.keyPath(key))
			return st, err
		})
		if err != nil || kst == nil {
			return
		}
		lst, err := call(ctx, func() (*zk.Stat, error) {
			_, st, err := ss.conn.Exists(ss.s.leasePath(key))
			return st, err
		})
		if err != nil || lst == nil || lst.EphemeralOwner != ss.id || ss.tracks(key) {
			return
		}
		_ = ss.s.releaseNodes(ctx, ss.conn, key, uint64(kst.Mzxid), kst.Version, ss.s.markerPath(key, ss.id))
	}()
}

// maxInFlight bounds the Acquires and Releases a session has under way at
// once, so that a burst of them (a process starting to campaign for
// thousands of keys) queues in the store rather than on the connection,
// where every KeepAlive would wait behind it.
const maxInFlight = 64

// slot waits, bounded by ctx, until fewer than maxInFlight Acquires and
// Releases are under way, and returns the func that frees the slot.
func (ss *storeSession) slot(ctx context.Context) (func(), error) {
	select {
	case ss.slots <- struct{}{}:
		return func() { <-ss.slots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for one of the session's %d requests under way: %w", maxInFlight, ctx.Err())
	}
}

// lockKey waits until no other Acquire or undo of key in the session is
// under way, bounded by ctx, and returns the func that lets the next one
// go: an undo never deletes a grant an Acquire is making or adopting.
func (ss *storeSession) lockKey(ctx context.Context, key string) (unlock func(), err error) {
	for {
		ss.mu.Lock()
		busy, ok := ss.busy[key]
		if !ok {
			done := make(chan struct{})
			ss.busy[key] = done
			ss.mu.Unlock()
			return func() {
				ss.mu.Lock()
				delete(ss.busy, key)
				ss.mu.Unlock()
				close(done)
			}, nil
		}
		ss.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// tracks reports whether the session tracks a grant of key.
func (ss *storeSession) tracks(key string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.grants[ss.s.keyPath(key)] != nil
}

// Release implements [tenure.StoreSession] as [Store.Release] does (a read,
// then one multi-operation that deletes the grant's nodes if the key node
// is still as the grant left it), over the session's connection. The
// session lives on. A grant this session does not hold (released, reported
// gone, superseded) gives an error matching [tenure.ErrLost].
func (ss *storeSession) Release(ctx context.Context, l tenure.Lease) error {
	if err := tenure.CheckKey(l.Key); err != nil {
		return err
	}
	if err := ss.usable(ctx); err != nil {
		return err
	}
	release, err := ss.slot(ctx)
	if err != nil {
		return ss.fail(ctx, "release", l.Key, err)
	}
	defer release()
	sg, err := ss.releasing(l)
	if err != nil {
		return err
	}
	err = ss.s.releaseNodes(ctx, ss.conn, l.Key, l.Term, sg.version, ss.s.markerPath(l.Key, ss.id))
	switch {
	case err == nil:
		ss.untrack(sg)
		return nil
	case errors.Is(err, errSuperseded):
		ss.untrack(sg)
		go ss.dropMarkers([]string{l.Key})
		return fmt.Errorf("%w: key %q term %d was superseded or deleted", tenure.ErrLost, l.Key, l.Term)
	default:
		ss.mu.Lock()
		sg.releasing = false // the next KeepAlive reports it if it is gone
		ss.mu.Unlock()
		return ss.fail(ctx, "release", l.Key, err)
	}
}

// releasing returns the grant l names, marked as being released, or an
// error matching [tenure.ErrLost] if the session does not hold it.
func (ss *storeSession) releasing(l tenure.Lease) (*sessionGrant, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sg := ss.grants[ss.s.keyPath(l.Key)]
	if sg == nil || sg.lease.Term != l.Term || sg.lease.Identity != l.Identity || sg.lease.Token != l.Token || sg.releasing {
		return nil, fmt.Errorf("%w: key %q term %d is not held in this session (released, gone, or being released)",
			tenure.ErrLost, l.Key, l.Term)
	}
	sg.releasing = true
	return sg, nil
}

// recheckLocked starts checking every grant again after the session's
// connection was re-established; ss.mu is held. The client sets the
// connection's watches again by itself, and ZooKeeper then fires those
// whose nodes changed while it was away, but nothing says when it is done:
// KeepAlive waits for this check instead, so that it reports every grant
// taken away during the disconnection. It costs two reads per grant, once
// per reconnection.
func (ss *storeSession) recheckLocked() {
	ss.uncheckedLocked()
	check := ss.checks
	grants := make([]*sessionGrant, 0, len(ss.grants))
	for _, sg := range ss.grants {
		grants = append(grants, sg)
	}
	go func() {
		for !ss.checkAll(grants) { // until it succeeds or the session ends
			select {
			case <-ss.ended:
				return
			case <-time.After(ss.ttl / 10):
			}
		}
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if ss.checks == check { // else the connection dropped again meanwhile
			close(ss.checked)
		}
	}()
}

// uncheckedLocked makes KeepAlive wait until the grants are checked again
// (the connection dropped, or was re-established); ss.mu is held.
func (ss *storeSession) uncheckedLocked() {
	for _, sg := range ss.grants { // their watches are not answered meanwhile
		sg.unfollowLocked()
	}
	ss.checks++
	select {
	case <-ss.checked:
		ss.checked = make(chan struct{})
	default:
	}
}

// checkAll sets the watches of grants again and marks those whose nodes
// changed gone, 32 at a time, bounded by the session's TTL and its end. It
// reports whether every check was answered.
func (ss *storeSession) checkAll(grants []*sessionGrant) bool {
	ctx, cancel := context.WithTimeout(context.Background(), ss.ttl)
	defer cancel()
	ctxwait.CancelOnClose(ctx, ss.ended, cancel)
	work := make(chan *sessionGrant)
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(len(grants), 32) {
		wg.Go(func() {
			for sg := range work {
				if ss.watch(ctx, sg) != nil {
					failed.Store(true)
				}
			}
		})
	}
	for _, sg := range grants {
		work <- sg
	}
	close(work)
	wg.Wait()
	return !failed.Load()
}

// awaitChecked waits, bounded by ctx, until the grants were checked after
// the last reconnection (see recheckLocked).
func (ss *storeSession) awaitChecked(ctx context.Context) error {
	return ss.awaitClosed(ctx, &ss.checked, "the grants are still being checked after a reconnection")
}

// awaitClosed waits, bounded by ctx, until the channel in *field (read
// under ss.mu, as it is replaced there) is closed; what says, for the
// error, what is still under way.
func (ss *storeSession) awaitClosed(ctx context.Context, field *chan struct{}, what string) error {
	ss.mu.Lock()
	c := *field
	ss.mu.Unlock()
	select {
	case <-c:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", what, ctx.Err())
	}
}

// closedChan returns a closed channel.
func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
