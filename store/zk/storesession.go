package zk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
)

var _ tenure.SessionStore = (*Store)(nil)

// storeSession is a [tenure.StoreSession]: one ZooKeeper session, on one
// connection, whose grants are its ephemeral nodes. It keeps a watch on
// each grant's key node and lease node, so that a grant deleted or
// overwritten from outside is known without asking, and KeepAlive is one
// request whatever the number of grants. A batch's grants are returned
// before their watches are set; KeepAlive waits for those (see
// watchLater).
type storeSession struct {
	s     *Store
	conn  *zk.Conn
	ttl   time.Duration
	gate  *dialGate
	ready chan struct{} // closed when the session is first established
	slots chan struct{} // one per Acquire or Release under way (see slot)

	mu      sync.Mutex
	id      int64                      // the ZooKeeper session id, once established
	grants  map[string]*sessionGrant   // by key node path
	pending map[*sessionGrant]struct{} // grants marked gone, for the next KeepAlive
	orphans []tenure.Lease             // gone grants replaced before a KeepAlive reported them
	unheld  []string                   // keys of grants left unwatched, to undo once a KeepAlive reported them (see unwatched)
	checked chan struct{}              // closed once the grants were checked after the last reconnection
	checks  int                        // counts disconnections and reconnections (see recheckLocked)
	watched chan struct{}              // closed once the last batch's grants are watched (see watchLater)
	busy    map[string]chan struct{}   // by key: closed when its Acquire or undo is over (see lockKey)
	unsure  map[string]unsure          // by key: what Acquires whose answers were lost read (see adopt)
	making  map[string]chan struct{}   // by key: closed once a grant under way is tracked or failed (see grantsUnderWay)
	ending                             // ends the session when not kept alive for ttl
}

// sessionGrant is one grant of a storeSession.
type sessionGrant struct {
	lease   tenure.Lease
	version int32 // the key node's version right after the grant
	czxid   int64 // the key node's creation, at the grant
	// follow, if not nil, is closed when the session stops vouching for
	// the grant to the store's watches that follow it (see follow).
	follow    chan struct{}
	gone      bool // a watch saw its nodes change
	releasing bool // a Release is under way: its own deletion is no news
}

// OpenSession implements [tenure.SessionStore]: it opens a ZooKeeper
// session (a connection of its own) whose session timeout is ttl and waits
// for it, bounded by ctx. A ttl above the servers' maxSessionTimeout gives
// an error matching [tenure.ErrInvalid]; one below their minSessionTimeout
// is raised by them (a crashed holder's grants then last until the
// minimum). The session ends, and its grants with it, ttl after OpenSession
// or the last successful KeepAlive was sent unless another succeeds first
// (the store closes it), or when ZooKeeper expires it because the process
// crashed or was cut off for the session timeout.
func (s *Store) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("%w: session ttl %s must be positive", tenure.ErrInvalid, ttl)
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	sent := time.Now()
	ss := &storeSession{s: s, ttl: ttl, gate: &dialGate{}, ready: make(chan struct{}), slots: make(chan struct{}, maxInFlight),
		checked: closedChan(), watched: closedChan(), grants: map[string]*sessionGrant{}, pending: map[*sessionGrant]struct{}{},
		busy: map[string]chan struct{}{}, ending: ending{ended: make(chan struct{})}}
	conn, negotiated, err := s.dialSession(ttl, ss.event, ss.gate)
	if err != nil {
		return nil, s.fail(ctx, "open session", "", err)
	}
	ss.mu.Lock()
	ss.conn = conn
	ss.mu.Unlock()
	if err := s.establish(ctx, conn, ss.ready, negotiated, ttl); err != nil {
		ss.end("it failed to open", false)
		if errors.Is(err, tenure.ErrInvalid) {
			return nil, err
		}
		return nil, s.fail(ctx, "open session", "", err)
	}
	ss.mu.Lock()
	ss.id = conn.SessionID()
	ss.expiry = time.AfterFunc(time.Until(sent.Add(ttl)), func() {
		ss.end("it was not kept alive within its TTL", false)
	})
	ss.mu.Unlock()
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.sessions[ss] = struct{}{}
	}
	s.mu.Unlock()
	if closed {
		ss.end("the store was closed", false)
		return nil, tenure.ErrClosed
	}
	return ss, nil
}

// event is the session's event callback, run synchronously by the client
// in the order the server sent the events, before the answers that follow
// them: it must not block. It can run before OpenSession stored the
// connection, for the first events.
func (ss *storeSession) event(ev zk.Event) {
	switch ev.Type {
	case zk.EventSession:
		ss.sessionEvent(ev)
	case zk.EventNodeDeleted, zk.EventNodeDataChanged, zk.EventNodeChildrenChanged, zk.EventNodeCreated:
		kp := strings.TrimSuffix(ev.Path, "/lease")
		ss.mu.Lock()
		if sg := ss.grants[kp]; sg != nil {
			ss.markGoneLocked(sg)
		}
		ss.mu.Unlock()
	}
}

// markGoneLocked records that sg's nodes changed; ss.mu is held.
func (ss *storeSession) markGoneLocked(sg *sessionGrant) {
	sg.unfollowLocked()
	sg.gone = true
	ss.pending[sg] = struct{}{}
}

// follow returns the record of the session's grant of key if it was made
// on the key node that prev describes (the same creation, the next
// version: no other write came between), and a channel closed once the
// session stops vouching for the grant to the store's watches that follow
// it: when the grant is marked gone (its own watches fired, or found its
// nodes changed when they were set), released, replaced or left
// unwatched, when the session ends, and when its connection drops (its
// watches go unanswered then). Until then the grant's record is the key's:
// the session watches the key node and the lease node, and any change to
// them marks the grant gone. It waits, bounded by ctx, for a grant of key
// under way (see grantsUnderWay). It reports false for any other grant,
// one already gone or being released, and while the grants are not
// checked after a reconnection.
func (ss *storeSession) follow(ctx context.Context, key string, prev *zk.Stat) (tenure.Record, <-chan struct{}, bool) {
	ss.mu.Lock()
	making := ss.making[key]
	ss.mu.Unlock()
	if making != nil {
		select {
		case <-making:
		case <-ctx.Done():
			return tenure.Record{}, nil, false
		}
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sg := ss.grants[ss.s.keyPath(key)]
	if sg == nil || sg.gone || sg.releasing || !isClosed(ss.checked) || sg.czxid != prev.Czxid || sg.version != prev.Version+1 {
		return tenure.Record{}, nil, false
	}
	if sg.follow == nil {
		sg.follow = make(chan struct{})
	}
	l := sg.lease
	// As recordOf reads the key node right after the grant.
	rec := ss.s.seen.Record(tenure.Record{Key: key, Holder: l.Identity, Term: l.Term, TTL: l.TTL, Value: l.Value, Remaining: l.TTL})
	return rec, sg.follow, true
}

// unfollowLocked tells the watches that follow sg (see follow) to watch
// its key themselves again; the session's mu is held.
func (sg *sessionGrant) unfollowLocked() {
	if sg.follow != nil {
		close(sg.follow)
		sg.follow = nil
	}
}

// grantsUnderWay notes that the session is making grants of keys, until
// the returned func is called once they are tracked or failed: a watch of
// the store that one of them fires waits for that before it judges whether
// the grant is the session's (see follow), since ZooKeeper may deliver the
// event on the control session before the grant's answer on this one.
func (ss *storeSession) grantsUnderWay(keys []string) (settled func()) {
	done := make(chan struct{})
	ss.mu.Lock()
	if ss.making == nil {
		ss.making = map[string]chan struct{}{}
	}
	for _, k := range keys {
		ss.making[k] = done
	}
	ss.mu.Unlock()
	return func() {
		ss.mu.Lock()
		for _, k := range keys {
			if ss.making[k] == done {
				delete(ss.making, k)
			}
		}
		ss.mu.Unlock()
		close(done)
	}
}

// sessionEvent ends the session when ZooKeeper expired it. A disconnection
// does not: the client reconnects within the session timeout, and the
// session lives on (KeepAlive fails meanwhile, so its user counts down).
func (ss *storeSession) sessionEvent(ev zk.Event) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	established := isClosed(ss.ready)
	switch ev.State {
	case zk.StateHasSession:
		if !established {
			close(ss.ready)
		} else if ss.id != 0 && ss.conn != nil && ss.conn.SessionID() != ss.id {
			// The client made a new session after the old one expired.
			go ss.end("its ZooKeeper session expired", false)
		} else if ss.id != 0 {
			ss.recheckLocked()
		}
	case zk.StateDisconnected:
		if established && ss.id != 0 {
			ss.uncheckedLocked()
		}
	case zk.StateExpired, zk.StateAuthFailed:
		if established {
			go ss.end("its ZooKeeper session expired ("+ev.State.String()+")", false)
		}
	}
}

// end ends the session for why: its connection is closed (which ends the
// ZooKeeper session and deletes its ephemeral nodes, if the server can be
// reached) and later calls return [tenure.ErrLost]. With wait it returns
// once the client closed the session (about a second at most).
func (ss *storeSession) end(why string, wait bool) {
	ss.mu.Lock()
	if !ss.endLocked(why) {
		ss.mu.Unlock()
		return
	}
	conn := ss.conn
	for _, sg := range ss.grants {
		sg.unfollowLocked()
	}
	ss.grants, ss.pending = nil, nil
	ss.mu.Unlock()
	s := ss.s
	s.mu.Lock()
	delete(s.sessions, ss)
	s.mu.Unlock()
	closeConn(conn, wait)
}

// lost returns an error matching [tenure.ErrLost] if the session ended,
// or [tenure.ErrClosed] if the store was closed; else nil.
func (ss *storeSession) lost() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case !isClosed(ss.ended):
		return nil
	case ss.s.isClosed():
		return tenure.ErrClosed
	}
	return fmt.Errorf("%w: the ZooKeeper session ended: %s", tenure.ErrLost, ss.why)
}

// usable is what every call checks first: the store is open, ctx is not
// done, and the session lives.
func (ss *storeSession) usable(ctx context.Context) error {
	if err := ss.s.usable(ctx); err != nil {
		return err
	}
	return ss.lost()
}

// fail is the error of a request of the session that failed with err:
// [tenure.ErrLost] if the session ended meanwhile, else the store's error.
func (ss *storeSession) fail(ctx context.Context, op, key string, err error) error {
	if lerr := ss.lost(); lerr != nil {
		return lerr
	}
	return ss.s.fail(ctx, op, key, err)
}

// KeepAlive implements [tenure.StoreSession] with one request, a sync on
// the session's connection, whatever the number of grants. Its answer
// proves the session alive when it was sent, and it comes after every
// watch event of the changes ZooKeeper applied before it: the grants whose
// nodes changed since they were granted are those it returns gone. It
// first waits, bounded by ctx, for the grants' watches to be set: after a
// reconnection (see recheckLocked), and for grants a batch returned before
// their watches were set (see watchLater); it fails if they are not set in
// time, so that no grant is kept alive unwatched. It
// restarts the TTL after which the store closes the session itself. An
// expired or closed session gives an error matching [tenure.ErrLost].
func (ss *storeSession) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	if err := ss.usable(ctx); err != nil {
		return nil, err
	}
	if err := ss.awaitChecked(ctx); err != nil {
		return nil, ss.fail(ctx, "keep-alive", "", err)
	}
	if err := ss.awaitWatched(ctx); err != nil {
		return nil, ss.fail(ctx, "keep-alive", "", err)
	}
	sent := time.Now()
	_, err := call(ctx, func() (string, error) { return ss.conn.Sync(ss.s.root) })
	if err != nil {
		return nil, ss.fail(ctx, "keep-alive", "", err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if isClosed(ss.ended) {
		return nil, fmt.Errorf("%w: the ZooKeeper session ended: %s", tenure.ErrLost, ss.why)
	}
	if ss.conn.SessionID() != ss.id {
		go ss.end("its ZooKeeper session expired", false)
		return nil, fmt.Errorf("%w: the ZooKeeper session expired", tenure.ErrLost)
	}
	ss.expiry.Reset(time.Until(sent.Add(ss.ttl)))
	gone, keys := ss.orphans, []string(nil)
	ss.orphans = nil
	for _, key := range ss.unheld {
		// Reported below, so their holders stop now; their nodes go one
		// session TTL later, as if the grants had expired, so that no
		// other process takes a key while its holder's task may still be
		// stopping.
		time.AfterFunc(ss.ttl, func() { ss.undo(key) })
	}
	ss.unheld = nil
	for sg := range ss.pending { // as many as went, not as many as there are
		if sg.releasing {
			continue // its Release reports it, or leaves it pending if it fails
		}
		gone = append(gone, sg.lease)
		keys = append(keys, sg.lease.Key)
		delete(ss.pending, sg)
		delete(ss.grants, ss.s.keyPath(sg.lease.Key))
	}
	if len(keys) > 0 {
		go ss.dropMarkers(keys)
	}
	return gone, nil
}

// dropMarkers deletes the session's markers of keys whose grants are
// known gone: their holders know, so the next holders of the keys need not
// wait for them. A key the session holds again keeps its (new) marker.
func (ss *storeSession) dropMarkers(keys []string) {
	ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
	defer cancel()
	for _, key := range keys {
		unlock, err := ss.lockKey(ctx, key)
		if err != nil {
			return
		}
		if !ss.tracks(key) {
			err = ss.conn.Delete(ss.s.markerPath(key, ss.id), -1)
		}
		unlock()
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return // the session is gone or cut off: its markers go with it
		}
	}
}

// Close implements [tenure.StoreSession]: it closes the ZooKeeper session,
// which deletes every node of its grants at once, waiting for ZooKeeper's
// answer (about a second at most) until ctx is done. A session already
// ended gives an error matching [tenure.ErrLost].
func (ss *storeSession) Close(ctx context.Context) error {
	if err := ss.usable(ctx); err != nil {
		return err
	}
	_, err := call(ctx, func() (struct{}, error) {
		ss.end("it was closed", true)
		return struct{}{}, nil
	})
	return err
}
