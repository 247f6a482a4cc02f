package memory

import "time"

// DeleteGrant deletes key's current grant without a release, keeping its
// term, as a fault would.
func DeleteGrant(s *Store, key string) {
	s.tamper(key, func(e *entry) *entry {
		if e != nil {
			e.holder, e.token = "", ""
		}
		return e
	})
}

// OverwriteGrant rewrites key's grant in place to name identity.
func OverwriteGrant(s *Store, key, identity string) {
	s.tamper(key, func(e *entry) *entry {
		if e != nil {
			e.holder, e.token = identity, "overwritten"
			e.expires = e.expires.Add(time.Hour)
		}
		return e
	})
}

// DeleteAll forgets key altogether, its term included.
func DeleteAll(s *Store, key string) { s.tamper(key, func(*entry) *entry { return nil }) }
