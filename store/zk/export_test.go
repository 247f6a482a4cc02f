package zk

import (
	"context"
	"time"

	"github.com/tenurehq/tenure"
)

// Crash cuts the connections of l's grant the way a crash or a partition
// would: the session is not closed, so ZooKeeper keeps the lease node
// until it expires the session after its timeout.
func Crash(st tenure.Store, l tenure.Lease) {
	s := st.(*Store)
	s.mu.Lock()
	g := s.grants[l.Token]
	s.mu.Unlock()
	if g != nil {
		g.gate.cutAll()
	}
}

// KeyPath is the key node of key under root, as the store names it.
func KeyPath(root, key string) string { return (&Store{root: root}).keyPath(key) }

// CrashSession cuts the connections of ss, a session of this store, the way
// a crash or a partition would: the ZooKeeper session is not closed, so its
// nodes stay until ZooKeeper expires it after its timeout.
func CrashSession(ss tenure.StoreSession) { ss.(*storeSession).gate.cutAll() }

// SessionID is the ZooKeeper session id of ss.
func SessionID(ss tenure.StoreSession) int64 { return ss.(*storeSession).conn.SessionID() }

// PauseSession cuts the connections of ss, a session of this store, and
// keeps it from reconnecting until resume is called.
func PauseSession(ss tenure.StoreSession) (resume func()) { return ss.(*storeSession).gate.pause() }

// GrantUntracked makes a grant of key in ss, a session of this store, as
// an Acquire whose answer was lost would have: its nodes exist, the
// session does not track it. With undo, the session then deletes it in the
// background, as after such an Acquire.
func GrantUntracked(ctx context.Context, st tenure.StoreSession, key, identity string, undo bool) error {
	ss := st.(*storeSession)
	n, err := ss.s.readNodeOn(ctx, ss.conn, key)
	if err != nil {
		return err
	}
	u := unsure{prev: n, floor: ss.s.seen.Highest(key)}
	if _, err := ss.s.grantNodes(ctx, ss.conn, ss.id, key, tenure.Claim{Identity: identity, TTL: ss.ttl}, n, time.Now()); err != nil {
		return err
	}
	ss.remember(key, u)
	if undo {
		ss.undo(key)
	}
	return nil
}

// BeforeBatchWatches makes f run in a session's background step that
// watches a batch's grants, after the batch returned them and before the
// watches are sent, until the returned func is called. Calling fail makes
// the step's watch requests fail.
func BeforeBatchWatches(f func(fail func())) (restore func()) {
	hook := func(cancel context.CancelFunc) { f(cancel) }
	beforeWatchLater.Store(&hook)
	return func() { beforeWatchLater.Store(nil) }
}

// StaleWatched makes the key node that a live watch of st noted for key
// (see fresh) look free and one version older, as if the change since had
// not reached the control session yet. It reports whether there was one.
func StaleWatched(st tenure.Store, key string) bool {
	s := st.(*Store)
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.watched[key]
	if !ok || w.n.st == nil {
		return false
	}
	old := *w.n.st
	old.Version--
	old.NumChildren = 0
	w.n.st = &old
	s.watched[key] = w
	return true
}

// BeforeRearm makes f run each time a watch of any store is about to send
// requests to arm its ZooKeeper watches again (an event fired, or the
// session's grant it followed ended), until the returned func is called.
func BeforeRearm(f func(key string)) (restore func()) {
	beforeRearm.Store(&f)
	return func() { beforeRearm.Store(nil) }
}

// SpentLeaseWait sets how long a watch that delivered a lease node's
// deletion goes without a watch on the lease node while the key node's
// data watch stays quiet, until the returned func is called.
func SpentLeaseWait(d time.Duration) (restore func()) {
	old := spentLeaseWait.Swap(int64(d))
	return func() { spentLeaseWait.Store(old) }
}
