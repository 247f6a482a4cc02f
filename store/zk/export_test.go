package zk

import "github.com/tenurehq/tenure"

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
