package postgres

import "github.com/tenurehq/tenure"

// SessionID returns the id of a session of this store, the row of the
// sessions table that tests look at.
func SessionID(ss tenure.StoreSession) string { return ss.(*session).id }

// SessionsTable returns the name of the store's sessions table.
func (s *Store) SessionsTable() string { return s.sessions.table }

// DerivedName is derivedName, for its test.
var DerivedName = derivedName
