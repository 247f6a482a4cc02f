package zk

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxwait"
	"github.com/tenurehq/tenure/internal/seen"
)

var _ tenure.BatchAcquirer = (*storeSession)(nil)

// batchItem is one request of a batch on its way.
type batchItem struct {
	i     int // the request's index
	key   string
	c     tenure.Claim
	prev  node // the key node as read
	err   error
	floor seen.Grant
	set   int // the index of its key node rewrite in the batch's multi-operation
	sg    *sessionGrant
	// unlock lets the next Acquire or undo of the key go (see lockKey);
	// watchLater takes it over for the grants it watches.
	unlock func()
}

// AcquireBatch implements [tenure.BatchAcquirer] in steps of one round trip
// each, whatever the size of the batch: the key nodes read (pipelined on
// the session's connection); for keys never granted, their key nodes
// created in one multi-operation and read again; one multi-operation that
// makes the grant of every free key (its lease node, marker and key node
// rewrite, as Acquire does for one: one transaction in ZooKeeper's log),
// and that checks, instead of a read per key, that the last holder's
// session left no marker (see lastGone). It returns once that
// multi-operation is applied: the watches of the grants are set afterwards,
// pipelined, in the background, and the next KeepAlive waits for them (see
// watchLater). A request that is not the simple case (a grant of this
// session's own, a multi that ZooKeeper refused as a whole because one key
// changed meanwhile or a last holder's marker was there) goes through
// Acquire on its own, which watches its grant before it returns.
func (ss *storeSession) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	res := make([]tenure.AcquireResult, len(reqs))
	sent0 := time.Now()
	live := ss.usable(ctx) // as Acquire, after a request's own checks
	var items []*batchItem
	for i, r := range reqs {
		c := tenure.Claim{Identity: r.Identity, TTL: ss.ttl, Value: r.Value}
		err := tenure.CheckClaim(r.Key, c)
		if err == nil {
			err = live
		}
		if err != nil {
			res[i].Err = err
			continue
		}
		items = append(items, &batchItem{i: i, key: r.Key, c: c})
	}
	alone := ss.batchLocked(ctx, items, res, sent0)
	var wg sync.WaitGroup
	for _, it := range alone { // at most maxInFlight at once (see slot)
		wg.Go(func() { res[it.i].Lease, res[it.i].Err = ss.Acquire(ctx, it.key, it.c.Identity, it.c.Value) })
	}
	wg.Wait()
	return res
}

// batchLocked makes the grants of items that it can in one multi, with
// the keys locked in key order (see lockKey) and one of the session's
// slots held, and returns the items that must go on their own.
func (ss *storeSession) batchLocked(ctx context.Context, items []*batchItem, res []tenure.AcquireResult, sent0 time.Time) []*batchItem {
	release, err := ss.slot(ctx)
	if err != nil {
		for _, it := range items {
			res[it.i].Err = ss.fail(ctx, "acquire", it.key, err)
		}
		return nil
	}
	defer release()
	slices.SortFunc(items, func(a, b *batchItem) int { return strings.Compare(a.key, b.key) })
	var locked []*batchItem
	defer func() {
		for _, it := range locked {
			if it.unlock != nil {
				it.unlock()
			}
		}
	}()
	for _, it := range items {
		unlock, err := ss.lockKey(ctx, it.key)
		if err != nil {
			res[it.i].Err = ss.fail(ctx, "acquire", it.key, err)
			continue
		}
		it.unlock = unlock
		locked = append(locked, it)
	}
	read := func(items []*batchItem) {
		ss.eachAtOnce(items, func(it *batchItem) { it.prev, it.err = ss.s.readNodeOn(ctx, ss.conn, it.key) })
	}
	var unread []*batchItem
	for _, it := range locked {
		if n, ok := ss.s.fresh(it.key); ok {
			it.prev = n // as a candidate's watch just read it (see fresh)
		} else {
			unread = append(unread, it)
		}
	}
	read(unread)
	if missing := ss.createKeyNodes(ctx, locked); len(missing) > 0 {
		read(missing)
	}
	var free, alone []*batchItem
	for _, it := range locked {
		rec := decode(it.prev.data)
		switch r := ss.s.recordOf(it.key, it.prev); {
		case it.err != nil:
			res[it.i].Err = ss.fail(ctx, "acquire", it.key, it.err)
		case it.prev.st == nil || rec.Session == ss.id || it.prev.orphan:
			// A key node still missing, this session's own grant, or a
			// lease node no session owns, which the grant must delete.
			alone = append(alone, it)
		case r.Held():
			ss.s.seen.Observe(it.key, r.Term, r.TTL)
			res[it.i].Err = &tenure.HeldError{Record: r}
		default:
			free = append(free, it)
		}
	}
	return append(alone, ss.grantAll(ctx, free, res, sent0)...)
}

// createKeyNodes creates, in one multi-operation, the key nodes of the
// items read as missing (keys never granted), and returns those items to
// be read again. If ZooKeeper refuses the multi (a key node created
// meanwhile, the store's root missing), it creates none and returns none:
// those items go on their own, which creates what is missing.
func (ss *storeSession) createKeyNodes(ctx context.Context, items []*batchItem) []*batchItem {
	var missing []*batchItem
	var ops []any
	for _, it := range items {
		if it.err == nil && it.prev.st == nil {
			missing = append(missing, it)
			ops = append(ops, &zk.CreateRequest{Path: ss.s.keyPath(it.key), Acl: ss.s.acl})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	if _, err := call(ctx, func() ([]zk.MultiResponse, error) { return ss.conn.Multi(ops...) }); err != nil {
		return nil
	}
	return missing
}

// grantAll makes the grants of free, whose key nodes were read, in one
// multi-operation, tracks them and has watchLater watch them, filling in
// res. It returns the items
// to try on their own: all of them if ZooKeeper refused the multi (one
// key changed since it was read).
func (ss *storeSession) grantAll(ctx context.Context, free []*batchItem, res []tenure.AcquireResult, sent0 time.Time) []*batchItem {
	if len(free) == 0 {
		return nil
	}
	s := ss.s
	ops := make([]any, 0, 5*len(free))
	for _, it := range free {
		it.floor = s.seen.Highest(it.key)
		data := encode(it.c.Identity, it.c.TTL, ss.id, it.prev.st.Version+1, it.c.Value)
		ops = append(ops,
			&zk.CreateRequest{Path: s.leasePath(it.key), Data: data, Acl: s.acl, Flags: zk.FlagEphemeral},
			&zk.CreateRequest{Path: s.markerPath(it.key, ss.id), Acl: s.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: s.keyPath(it.key), Data: data, Version: it.prev.st.Version})
		it.set = len(ops) - 1
		ops = append(ops, s.lastGone(ss.id, it.key, it.prev)...)
	}
	keys := make([]string, len(free))
	for k, it := range free {
		keys[k] = it.key
	}
	defer ss.grantsUnderWay(keys)() // until the grants are tracked
	mres, err := call(ctx, func() ([]zk.MultiResponse, error) { return ss.conn.Multi(ops...) })
	switch {
	case err == nil && len(mres) == len(ops):
	case err == nil:
		err = fmt.Errorf("unexpected multi-operation response: %d results for %d operations", len(mres), len(ops))
		fallthrough
	case len(mres) == 0: // sent, and its answer lost: it may have been applied
		for _, it := range free {
			ss.remember(it.key, unsure{prev: it.prev, floor: it.floor})
			ss.undo(it.key)
			res[it.i].Err = ss.fail(ctx, "acquire (batch)", it.key, err)
		}
		return nil
	default: // refused as a whole: nothing was applied
		return free
	}
	for _, it := range free {
		st := mres[it.set].Stat
		term := uint64(st.Mzxid)
		// The last grant's session was gone (see lastGone).
		l := tenure.Lease{Key: it.key, Identity: it.c.Identity, Term: term, TTL: it.c.TTL,
			Token: fmt.Sprintf("%x.%x", ss.id, term), Value: it.c.Value, Wait: waitAfter(it.prev, false, it.floor, it.c.TTL, sent0)}
		s.seen.Observe(it.key, term, it.c.TTL)
		it.sg = &sessionGrant{lease: l, version: st.Version, czxid: st.Czxid}
		if it.err = ss.track(it.sg); it.err != nil {
			res[it.i].Err = it.err // the grant ended with the session
			it.sg = nil
		}
	}
	var made []*batchItem
	for _, it := range free {
		if it.sg != nil {
			res[it.i].Lease = it.sg.lease
			made = append(made, it)
		}
	}
	ss.watchLater(made)
	return nil
}

// lastGone is the operations that make a batch's multi-operation apply
// only if the grant that key node prev names has no marker (see
// markerPath): that its session ended, or released the key. A marker is
// created and deleted again, which ZooKeeper refuses (and with it the
// whole multi-operation) if the marker exists: the lease node was deleted
// from outside while that session lived, and the key then goes on its own,
// whose Wait covers that grant (see lastAlive). It saves the read per key
// that lastAlive sends. None for a key node that names no session, or
// this one (sid).
func (s *Store) lastGone(sid int64, key string, prev node) []any {
	m, ok := s.lastMarker(sid, key, prev)
	if !ok {
		return nil
	}
	return []any{&zk.CreateRequest{Path: m, Acl: s.acl}, &zk.DeleteRequest{Path: m, Version: -1}}
}

// watchLater sets the watches of the grants of items, just made and
// tracked, in the background, so that the batch returns its grants as soon
// as the multi-operation is applied; the next batch's reads and
// multi-operation then overlap these watches on the connection. Nothing
// is missed meanwhile:
//
//   - each watch request also reads its node, and watch marks the grant
//     gone if its nodes already changed since the multi-operation (deleted
//     or overwritten from outside before the watch was set);
//   - KeepAlive, the only way a grant's loss reaches its holder, waits for
//     the watches of every grant tracked before it started (see
//     awaitWatched), so its answer still covers every change ZooKeeper
//     applied to them before its sync;
//   - a grant whose watches cannot be set (the connection dropped, the
//     session ended, no answer within the session's TTL) is forgotten and
//     reported gone by the next KeepAlive: its holder steps down rather
//     than lead unwatched. Its nodes, marker included, stay until one
//     session TTL after that KeepAlive reported it (see unwatched), so
//     that nobody else gets the key while its holder may still lead;
//   - the items' keys stay locked (see lockKey) until their watches are
//     set, so that no other Acquire of the key in this session overlaps
//     them, as when Acquire watches before it returns.
//
// One such background step runs at a time, in batch order: a step waits
// for the one before it, which bounds the requests under way on the
// connection to about one batch's worth ahead of the batch being made.
func (ss *storeSession) watchLater(items []*batchItem) {
	if len(items) == 0 {
		return
	}
	unlocks := make([]func(), 0, len(items))
	for _, it := range items {
		unlocks = append(unlocks, it.unlock)
		it.unlock = nil
	}
	done := make(chan struct{})
	ss.mu.Lock()
	prev := ss.watched
	ss.watched = done
	ss.mu.Unlock()
	go func() {
		defer close(done)
		defer func() {
			for _, unlock := range unlocks {
				unlock()
			}
		}()
		<-prev
		ctx, cancel := context.WithTimeout(context.Background(), ss.ttl)
		defer cancel()
		ctxwait.CancelOnClose(ctx, ss.ended, cancel)
		if f := beforeWatchLater.Load(); f != nil {
			(*f)(cancel)
		}
		ss.eachAtOnce(items, func(it *batchItem) { it.err = ss.watch(ctx, it.sg) })
		for _, it := range items {
			if it.err != nil {
				ss.remember(it.key, unsure{prev: it.prev, floor: it.floor})
				ss.unwatched(it.sg)
			}
		}
	}()
}

// beforeWatchLater, if set (by tests), runs in watchLater's background
// step before its watches are sent, with the func that cancels the step's
// requests.
var beforeWatchLater atomic.Pointer[func(cancel context.CancelFunc)]

// unwatched forgets sg, a grant whose watches could not be set, and has
// the next KeepAlive report it gone (unless it was released or replaced
// meanwhile). One session TTL after that KeepAlive its nodes are deleted
// in the background (see undo), unless the session holds the key again by
// then (adopt): not before, since its holder, which was handed the grant,
// may lead until it is told and its task has stopped, as after an expiry.
func (ss *storeSession) unwatched(sg *sessionGrant) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	kp := ss.s.keyPath(sg.lease.Key)
	if ss.grants[kp] != sg {
		return
	}
	sg.unfollowLocked()
	delete(ss.grants, kp)
	delete(ss.pending, sg)
	ss.orphans = append(ss.orphans, sg.lease)
	ss.unheld = append(ss.unheld, sg.lease.Key)
}

// awaitWatched waits, bounded by ctx, until the watches of every grant
// the session tracked when it was called are set (see watchLater).
func (ss *storeSession) awaitWatched(ctx context.Context) error {
	return ss.awaitClosed(ctx, &ss.watched, "the watches of new grants are still being set")
}

// eachAtOnce runs f on every item at the same time and waits for all:
// their requests go out pipelined on the session's connection.
func (ss *storeSession) eachAtOnce(items []*batchItem, f func(*batchItem)) {
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { f(it) })
	}
	wg.Wait()
}
