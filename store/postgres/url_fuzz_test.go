package postgres

import (
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// FuzzOpenURL: Open never panics, and with a secret planted in any secret
// position neither its error nor the store's description of itself (used
// in every later error) contains it. Open connects nothing, so no server
// is needed.
func FuzzOpenURL(f *testing.F) {
	f.Add("postgres://u@h/db?sslmode=bogus&password=pw", uint8(6), "postgres", "u", "h", "db", "sslmode=bogus")
	f.Add("postgres://u@h:99999/db?tenure_table=Bad-Name", uint8(2), "postgresql", "u", "h:1", "db", "pool_max_conns=x")
	storetest.FuzzOpen(f, "postgres://u:pw@127.0.0.1:1/db?tenure_table=leases&sslmode=disable", []string{"postgres", "postgresql", ""},
		storetest.OpenOffline(Open, func(s *Store) []string { return []string{s.redacted} }))
}
