package redis

import (
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// FuzzOpenURL: Open never panics, and with a secret planted in any secret
// position neither its error nor the store's description of itself (used
// in every later error) contains it.
func FuzzOpenURL(f *testing.F) {
	f.Add("redis://u@h:1/0?max_retries=2&dial_timeout=1s&tenure_prefix=%zz", uint8(3), "redis", "", "h", "", "db=99999999999999999999")
	f.Add("rediss://h:6380/0?tenure_keyspace=maybe&tenure_prefix=a&tenure_prefix=b", uint8(2), "rediss", "u", "h:1", "1", "protocol=9")
	storetest.FuzzOpen(f, "redis://:pw@127.0.0.1:1/0?tenure_prefix=a&tenure_keyspace=false", []string{"redis", "rediss", ""},
		storetest.OpenOffline(Open, func(s *Store) []string { return []string{s.redacted} }))
}
