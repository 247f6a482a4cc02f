package postgres

import (
	"context"
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// FuzzOpenURL: Open never panics, and with a secret planted in any secret
// position neither its error nor the store's description of itself (used
// in every later error) contains it. Open connects nothing, so no server
// is needed.
func FuzzOpenURL(f *testing.F) {
	for _, s := range storetest.SecretSeeds("postgres", "postgresql", "") {
		f.Add("postgres://u:pw@127.0.0.1:1/db?tenure_table=leases&sslmode=disable", s.Form, s.Scheme, s.User, s.Host, s.Path, s.Extra)
	}
	f.Add("postgres://u@h/db?sslmode=bogus&password=pw", uint8(6), "postgres", "u", "h", "db", "sslmode=bogus")
	f.Add("postgres://u@h:99999/db?tenure_table=Bad-Name", uint8(2), "postgresql", "u", "h:1", "db", "pool_max_conns=x")
	f.Fuzz(func(t *testing.T, raw string, form uint8, scheme, user, host, path, extra string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing may dial
		if s, err := Open(ctx, raw); err == nil {
			s.Close()
		}
		in := storetest.SecretURL(form, scheme, user, host, path, extra)
		s, err := Open(ctx, in)
		if err != nil {
			storetest.NoSecret(t, in, err.Error())
			return
		}
		defer s.Close()
		storetest.NoSecret(t, in, s.redacted)
	})
}
