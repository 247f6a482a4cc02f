package zk

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
)

// watchReadTimeout bounds each read a watch makes.
const watchReadTimeout = 5 * time.Second

// Watch implements [tenure.Reader] with two ZooKeeper watches: an
// existence watch on the key's lease node, which a grant creates and whose
// end (a release, an expiry, a deletion from outside) deletes it, and a
// data watch on the key node, which every grant rewrites (an existence
// watch while the key node is missing). Lease nodes are ephemeral, so
// ZooKeeper announces every end of a grant, and a watch on a held key
// makes no reads while the holder renews. The lease node's deletion says
// by itself that the key is free: the watch delivers that at once, at the
// ended grant's term, without a request, and arms the lease node's watch
// again only when the key node's data watch fires (the next grant) or
// after spentLeaseWait; a grant that a session of this Store then makes
// costs it no request either (see ownGrant). Other events re-arm the
// watches that fired, and the read that arms them is the record delivered
// to the [tenure.Follow] loop. The channel is closed when ctx is done, the
// store is closed, a read fails, or the control session disconnects.
//
// Watch blocks until ZooKeeper has armed the watches and the record has
// been read with them (at most 5 s, or until ctx is done), so no change
// after the first record can be missed; it fails without a connected,
// authenticated control session.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
	// Arm, then read: a caller that goes on to Acquire cannot miss a
	// release.
	rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
	defer cancel()
	a, err := s.armRead(rctx, key)
	if err != nil {
		return nil, s.fail(rctx, "watch", key, err)
	}
	wctx, stop := context.WithCancel(ctx)
	records := make(chan tenure.Record)
	s.noteWatched(key, records, a)
	go s.rearm(wctx, key, a, records)
	get := func(ctx context.Context) (tenure.Record, error) {
		rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
		defer cancel()
		return s.read(rctx, key)
	}
	out := make(chan tenure.Record)
	go func() {
		defer stop()
		tenure.Follow{
			Get:       get,
			Initial:   &a.rec, // read above, after the watch was armed
			Records:   records,
			Done:      s.done, // the watch ends when the store closes
			Announced: true,   // lease nodes are ephemeral: ZooKeeper reports their end
		}.Run(wctx, out)
	}()
	return out, nil
}

// spentLeaseWait is how long a watch that delivered a lease node's
// deletion goes without a watch on the lease node while its data watch on
// the key node stays quiet. Every grant rewrites the key node, so that
// watch sees the next one; only a lease node created from outside without
// a rewrite (with zkCli, say) waits that long to be seen. Tests shorten
// it.
var spentLeaseWait atomic.Int64

func init() { spentLeaseWait.Store(int64(10 * time.Second)) }

// armed is the watches [Store.armRead] armed on a key, and the record it
// read after arming them.
type armed struct {
	// lease is the existence watch on the lease node; nil while spent
	// (see Store.leaseGone), until it is armed again.
	lease <-chan zk.Event
	// data is the data watch on the key node, or the existence watch of
	// a missing key node; nil if none is armed.
	data <-chan zk.Event
	// spent, while lease is nil after the lease node's deletion, fires
	// when the lease node's watch is to be armed again without a change
	// of the key node (see spentLeaseWait).
	spent <-chan time.Time
	down  <-chan struct{} // closed when the control session disconnects
	// own, instead of watches, is closed when a session of this Store
	// stops vouching for its grant of the key, which the watch follows
	// (see Store.ownGrant).
	own <-chan struct{}
	// whole says that the data watch is armed on the key node, with the
	// lease node's watch or spent, and n is the key node as read with
	// them: one of them firing re-arms just that one.
	whole bool
	n     node
	rec   tenure.Record
}

// rearm waits for an armed watch to fire, arms it again, and sends the
// record read while arming it on records: one goroutine reads and sends,
// so the records go out in the order they were read, and no change slips
// between a record and the watches armed before it. The lease node's
// deletion needs no request (see leaseGone), and nor does a fired watch on
// a key that a session of this Store has just taken: the watch follows
// the session's grant instead (see ownGrant). It closes records, which
// ends the watch, when the control session disconnects or arming fails,
// and returns when ctx is done.
func (s *Store) rearm(ctx context.Context, key string, a armed, records chan<- tenure.Record) {
	defer close(records)
	defer s.forgetWatched(key, records)
	for {
		var lease, data, deleted bool
		select {
		case ev, ok := <-a.lease:
			// !ok: fresh took the event (see fired); its kind is unknown.
			lease, deleted = true, ok && ev.Type == zk.EventNodeDeleted
		case <-a.data:
			data = true
		case <-a.spent:
			lease = true
		case <-a.own:
		case <-a.down:
			return
		case <-ctx.Done():
			return
		}
		if deleted && a.whole && a.n.held() {
			// ZooKeeper sends events in the order of its changes: a data
			// watch that has not fired by now saw no rewrite of the key
			// node before the deletion.
			data = fired(a.data)
		}
		if deleted && a.whole && a.n.held() && !data {
			a = s.leaseGone(key, a)
		} else if own, ok := s.ownGrant(ctx, key, a, lease || data); ok {
			a = own
		} else {
			rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
			if f := beforeRearm.Load(); f != nil {
				(*f)(key)
			}
			var err error
			if a.whole {
				a, err = s.rearmFired(rctx, key, a, lease || a.lease == nil, data)
			} else {
				a, err = s.armRead(rctx, key)
			}
			cancel()
			if err != nil {
				return
			}
		}
		s.noteWatched(key, records, a)
		select {
		case records <- a.rec:
		case <-ctx.Done():
			return
		}
	}
}

// leaseGone is a, both watches armed on a held key, after its lease node
// was deleted while its key node was not rewritten: the key is free at the
// ended grant's term, which is what a read right after the deletion would
// have shown. It sends no request: the lease node's watch stays spent
// until the data watch fires (the next grant, which rewrites the key node;
// when a session of this Store makes it, ownGrant follows it without a
// request) or spentLeaseWait passes.
func (s *Store) leaseGone(key string, a armed) armed {
	a.n = withLease(a.n, false)
	a.lease = nil
	a.spent = time.After(time.Duration(spentLeaseWait.Load()))
	a.rec = s.recordOf(key, a.n)
	return a
}

// withLease is key node n, read with the lease node's watch, as it stands
// once the lease node exists (ok) or not: its children as known, and the
// count in its stat, adjusted; the rest of the stat (Pzxid) is left as
// read.
func withLease(n node, ok bool) node {
	st := *n.st
	kids := slices.DeleteFunc(slices.Clone(n.kids), func(k string) bool { return k == "lease" })
	had := n.known && len(kids) < len(n.kids)
	switch {
	case ok && !had:
		st.NumChildren++
	case !ok && had:
		st.NumChildren--
	}
	if ok {
		kids = append(kids, "lease")
		st.NumChildren = max(st.NumChildren, 1)
	}
	st.NumChildren = max(st.NumChildren, 0)
	return node{data: n.data, st: &st, kids: kids, known: true}
}

// ownGrant is how a watch whose armed watches a fired (firing says
// whether one did) follows a grant of its key that a session of this
// Store made, instead of arming its own watches again: the candidate whose
// batch just won the key stops watching as soon as it is told, and the
// session watches its grant anyway. It reports false unless the key node
// as a read it was free and the session's grant is the next write of
// that key node (same creation, next version), so that no other holder
// came between; it waits, bounded by ctx, for a grant of the key under way
// in a session (see grantsUnderWay), since the event may arrive before
// the grant's answer. The armed it returns holds the grant's record and,
// instead of watches, the session's word for it (see storeSession.follow):
// when that ends, the watch arms its own watches again and reads.
func (s *Store) ownGrant(ctx context.Context, key string, a armed, firing bool) (armed, bool) {
	if !firing || !a.whole || a.n.held() {
		return armed{}, false
	}
	s.mu.Lock()
	sss := make([]*storeSession, 0, len(s.sessions))
	for ss := range s.sessions {
		sss = append(sss, ss)
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
	defer cancel()
	for _, ss := range sss {
		if rec, own, ok := ss.follow(ctx, key, a.n.st); ok {
			return armed{own: own, down: a.down, rec: rec}, true
		}
	}
	return armed{}, false
}

// beforeRearm, if set (by tests), runs each time a watch is about to send
// requests to arm its watches again, with the watch's key.
var beforeRearm atomic.Pointer[func(key string)]

// rearmFired arms again the watches of a, whole, that fired (lease, or
// spent; data) and reads the record with them: one request for a grant's
// start or end alone (the lease node's ExistsW; the key node's data is
// unchanged while its data watch has not fired), two when the key node
// was rewritten too. ZooKeeper sends a watch's event before the answer to
// any later request, so a watch that has not fired by the time an answer
// arrives saw no change up to that answer; one that fired meanwhile is
// armed again in turn. A key node deleted meanwhile starts over with
// armRead.
func (s *Store) rearmFired(ctx context.Context, key string, a armed, lease, data bool) (armed, error) {
	kp, lp := s.keyPath(key), s.leasePath(key)
	n := a.n
	for lease || data {
		if lease {
			type result struct {
				ok bool
				st *zk.Stat
				ev <-chan zk.Event
			}
			r, err := call(ctx, func() (result, error) {
				ok, st, ev, err := s.ctl.ExistsW(lp)
				return result{ok, st, ev}, err
			})
			if err != nil {
				return armed{}, err
			}
			a.lease, a.spent, n = r.ev, nil, withLease(n, r.ok)
			n.orphan, n.leaseCzxid = ownedByNoSession(r.ok, r.st), leaseCzxid(r.ok, r.st)
		}
		data = data || fired(a.data)
		if data {
			r, err := call(ctx, func() (armed, error) {
				d, st, ev, err := s.ctl.GetW(kp)
				return armed{data: ev, n: node{data: d, st: st}}, err
			})
			if errors.Is(err, zk.ErrNoNode) {
				return s.armRead(ctx, key)
			}
			if err != nil {
				return armed{}, err
			}
			// The lease node is as its watch last found it.
			orphan, czxid := n.orphan, n.leaseCzxid
			a.data, n = r.data, withLeaseCounted(r.n, slices.Contains(n.kids, "lease"))
			n.orphan, n.leaseCzxid = orphan, czxid
		}
		lease, data = fired(a.lease), false
	}
	a.n, a.rec = n, s.recordOf(key, n)
	return a, nil
}

// withLeaseCounted is key node n, just read, whose lease node exists (ok)
// or not, as the lease node's watch last found: its stat counts the lease
// node already.
func withLeaseCounted(n node, ok bool) node {
	n.known = true
	if ok {
		n.kids = []string{"lease"}
		if n.st.NumChildren == 0 { // deleted since, and its watch is firing
			st := *n.st
			st.NumChildren = 1
			n.st = &st
		}
	}
	return n
}

// fired reports whether watch ev has fired (without waiting). It takes the
// event: a later receive gets the closed channel's zero Event.
func fired(ev <-chan zk.Event) bool {
	select {
	case <-ev:
		return true
	default:
		return false
	}
}

// firedWatch is a watch that has fired, for one whose event was taken.
var firedWatch = func() <-chan zk.Event {
	ch := make(chan zk.Event)
	close(ch)
	return ch
}()

// armRead sets ZooKeeper watches on the key and reads its record with
// them: a data watch on the key node (GetW), whose answer is its data and
// stat, then an existence watch on the lease node (ExistsW), whose answer
// says whether the key is held, in that order on the control session; or,
// for a key node that does not exist, an existence watch on it whose
// answer says so. If the key node changed between the two, or was created
// after the first, it is read once more.
func (s *Store) armRead(ctx context.Context, key string) (armed, error) {
	down, err := s.session(ctx)
	if err != nil {
		return armed{}, err
	}
	kp, lp := s.keyPath(key), s.leasePath(key)
	type result struct {
		lease, data <-chan zk.Event
		n           node
		known       bool // n is the key node as read after the watches were armed
	}
	r, err := call(ctx, func() (result, error) {
		d, st, dev, err := s.ctl.GetW(kp)
		if errors.Is(err, zk.ErrNoNode) {
			ok, _, ev, err := s.ctl.ExistsW(kp)
			return result{data: ev, known: err == nil && !ok}, err
		}
		if err != nil {
			return result{}, err
		}
		ok, lst, lev, err := s.ctl.ExistsW(lp)
		if err != nil {
			// Without the lease node's watch an expiry would go unseen:
			// fail, as a failed read does.
			return result{}, err
		}
		if fired(dev) { // the key node changed since it was read: read it, and arm both again
			return result{data: firedWatch}, nil
		}
		return result{lease: lev, data: dev, n: withLeaseStat(node{data: d, st: st}, ok, lst), known: true}, nil
	})
	if err != nil {
		return armed{}, err
	}
	a := armed{lease: r.lease, data: r.data, down: down, whole: r.lease != nil, n: r.n}
	if r.known {
		a.rec = s.recordOf(key, r.n)
		return a, nil
	}
	if a.rec, err = s.read(ctx, key); err != nil {
		return armed{}, err
	}
	return a, nil
}

// watchedNode is the key node as a live watch of this Store read it when
// it armed both its watches on the control session.
type watchedNode struct {
	n           node
	lease, data <-chan zk.Event
	by          chan<- tenure.Record // the watch's own channel: whose note it is
}

// noteWatched notes the key node that the watch by armed with a, if a is
// both watches and the node read with them; else it forgets the watch's
// note.
func (s *Store) noteWatched(key string, by chan<- tenure.Record, a armed) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !a.whole {
		if s.watched[key].by == by {
			delete(s.watched, key)
		}
		return
	}
	s.watched[key] = watchedNode{n: a.n, lease: a.lease, data: a.data, by: by}
}

// forgetWatched forgets the note of the watch by, which ended.
func (s *Store) forgetWatched(key string, by chan<- tenure.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watched[key].by == by {
		delete(s.watched, key)
	}
}

// fresh returns key's node as a live watch of this Store last read it,
// if neither of its watches has fired since: no change of the key node
// that ZooKeeper told the control session of. A session's batch uses it
// instead of reading the key node again (a candidate's watch has just
// read it, which is why it asks): it saves a read per key when a crashed
// holder's keys move at once. The node may lag the servers by the time
// an event takes to arrive, as a read lags them by the time until the
// multi-operation: the multi-operation applies only if the key node's
// version is still the one read, else the batch's keys go on their own,
// each read again.
func (s *Store) fresh(key string) (node, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.watched[key]
	if !ok || fired(w.lease) || fired(w.data) {
		return node{}, false
	}
	return w.n, true
}
