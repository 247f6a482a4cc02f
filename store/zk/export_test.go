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
