package redis

import (
	"context"
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// FuzzOpenURL: Open never panics, and with a secret planted in any secret
// position neither its error nor the store's description of itself (used
// in every later error) contains it.
func FuzzOpenURL(f *testing.F) {
	for _, s := range storetest.SecretSeeds("redis", "rediss", "") {
		f.Add("redis://:pw@127.0.0.1:1/0?tenure_prefix=a&tenure_keyspace=false", s.Form, s.Scheme, s.User, s.Host, s.Path, s.Extra)
	}
	f.Add("redis://u@h:1/0?max_retries=2&dial_timeout=1s&tenure_prefix=%zz", uint8(3), "redis", "", "h", "", "db=99999999999999999999")
	f.Add("rediss://h:6380/0?tenure_keyspace=maybe&tenure_prefix=a&tenure_prefix=b", uint8(2), "rediss", "u", "h:1", "1", "protocol=9")
	f.Fuzz(func(t *testing.T, raw string, form uint8, scheme, user, host, path, extra string) {
		ctx := context.Background()
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
