package zk

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
)

// watchReadTimeout bounds each read a watch makes.
const watchReadTimeout = 5 * time.Second

// Watch implements [tenure.Reader] with a ZooKeeper child watch on the
// key node (an existence watch until the node exists): acquisitions,
// releases and expiries all add or remove its lease child, which is
// ephemeral, so ZooKeeper announces every end of a grant. After each event
// the watch re-arms, and the read that arms its data watch is the record
// delivered to the [tenure.Follow] loop: an event costs the two requests
// that arm the watches, not a third to read. Since expiries are announced,
// a watch on a held key makes no reads while the holder renews. The
// channel is closed when ctx is done, the store is closed, a read fails,
// or the control session disconnects.
//
// Watch blocks until ZooKeeper has armed the watch and the record has been
// read after it (at most 5 s, or until ctx is done), so no change after the
// first record can be missed; it fails without a connected, authenticated
// control session.
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

// armed is the watches [Store.armRead] armed on a key, and the record it
// read after arming them.
type armed struct {
	child <-chan zk.Event // the child watch, or the existence watch of a missing key node
	data  <-chan zk.Event // the data watch; nil if none is armed
	down  <-chan struct{} // closed when the control session disconnects
	// own, instead of watches, is closed when a session of this Store
	// stops vouching for its grant of the key, which the watch follows
	// (see Store.ownGrant).
	own <-chan struct{}
	// whole says that both watches are armed and n is the key node as
	// read with them: one of them firing re-arms just that one.
	whole bool
	n     node
	rec   tenure.Record
}

// rearm waits for an armed watch to fire, arms it again, and sends the
// record read while arming it on records: one goroutine reads and sends,
// so the records go out in the order they were read, and no change slips
// between a record and the watches armed before it. A fired watch on a
// key that a session of this Store has just taken costs no request: it
// follows the session's grant instead (see ownGrant). It closes records,
// which ends the watch, when the control session disconnects or arming
// fails, and returns when ctx is done.
func (s *Store) rearm(ctx context.Context, key string, a armed, records chan<- tenure.Record) {
	defer close(records)
	defer s.forgetWatched(key, records)
	for {
		var child, data bool
		select {
		case <-a.child:
			child = true
		case <-a.data:
			data = true
		case <-a.own:
		case <-a.down:
			return
		case <-ctx.Done():
			return
		}
		if own, ok := s.ownGrant(ctx, key, a, child || data); ok {
			a = own
		} else {
			rctx, cancel := context.WithTimeout(ctx, watchReadTimeout)
			if f := beforeRearm.Load(); f != nil {
				(*f)(key)
			}
			var err error
			if a.whole {
				a, err = s.rearmFired(rctx, key, a, child, data)
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
	if !firing || !a.whole || a.n.st.NumChildren > 0 {
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

// rearmFired arms again the watches of a, both armed, that fired (child,
// data) and reads the record with them: one request for a grant's start
// or end alone (ChildrenW, whose answer has the key node's stat; its data
// is unchanged while the data watch has not fired), two when the key node
// was rewritten too. ZooKeeper sends a watch's event before the answer to
// any later request, so a watch that has not fired by the time an answer
// arrives saw no change up to that answer; one that fired meanwhile is
// armed again in turn. A key node deleted meanwhile starts over with
// armRead.
func (s *Store) rearmFired(ctx context.Context, key string, a armed, child, data bool) (armed, error) {
	kp := s.keyPath(key)
	n := a.n
	for child || data {
		if child {
			type result struct {
				kids []string
				st   *zk.Stat
				ev   <-chan zk.Event
			}
			r, err := call(ctx, func() (result, error) {
				kids, st, ev, err := s.ctl.ChildrenW(kp)
				return result{kids, st, ev}, err
			})
			if errors.Is(err, zk.ErrNoNode) {
				return s.armRead(ctx, key)
			}
			if err != nil {
				return armed{}, err
			}
			a.child, n.st, n.kids, n.known = r.ev, r.st, r.kids, true
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
			// The children are as the child watch last read them.
			a.data, n = r.data, node{data: r.n.data, st: r.n.st, kids: n.kids, known: n.known}
		}
		child, data = fired(a.child), false
	}
	a.n, a.rec = n, s.recordOf(key, n)
	return a, nil
}

// fired reports whether watch ev has fired (without waiting).
func fired(ev <-chan zk.Event) bool {
	select {
	case <-ev:
		return true
	default:
		return false
	}
}

// armRead sets ZooKeeper watches on the key and reads its record after
// they are armed: a child watch (ChildrenW), then a data watch whose read
// (GetW) is the record, in that order on the control session; or, for a
// key node that does not exist, an existence watch whose answer says so.
// A key node created between the two is read once more.
func (s *Store) armRead(ctx context.Context, key string) (armed, error) {
	down, err := s.session(ctx)
	if err != nil {
		return armed{}, err
	}
	kp := s.keyPath(key)
	type result struct {
		child, data <-chan zk.Event
		n           node
		known       bool // n is the key node as read after the watches were armed
	}
	// A child watch sees grants end and begin; a data watch sees the key
	// node rewritten (from outside tenure: a grant's own write comes with
	// its child).
	r, err := call(ctx, func() (result, error) {
		kids, _, ev, err := s.ctl.ChildrenW(kp)
		if errors.Is(err, zk.ErrNoNode) {
			ok, _, ev, err := s.ctl.ExistsW(kp)
			return result{child: ev, known: err == nil && !ok}, err
		}
		if err != nil {
			return result{}, err
		}
		data, st, dev, err := s.ctl.GetW(kp)
		if err != nil {
			return result{child: ev}, nil // the child watch is armed; the next one re-arms both
		}
		return result{child: ev, data: dev, n: node{data: data, st: st, kids: kids, known: true}, known: true}, nil
	})
	if err != nil {
		return armed{}, err
	}
	a := armed{child: r.child, data: r.data, down: down, whole: r.data != nil, n: r.n}
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
	child, data <-chan zk.Event
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
	s.watched[key] = watchedNode{n: a.n, child: a.child, data: a.data, by: by}
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
	if !ok || fired(w.child) || fired(w.data) {
		return node{}, false
	}
	return w.n, true
}
