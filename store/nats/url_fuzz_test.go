package nats

import (
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// FuzzOpenURL: Open never panics, and with a secret planted in any secret
// position neither its error nor the store's description of itself (used
// in every later error) contains it.
func FuzzOpenURL(f *testing.F) {
	f.Add("nats://u:pw@h:1,h:2/bucket/prefix", uint8(0), "nats", "u", "h:1", "b/p", "")
	f.Add("nats://h:1/b.c?x=1", uint8(1), "nats", "", "h:1", "b", "")
	storetest.FuzzOpen(f, "nats://u:pw@127.0.0.1:1/leases", []string{"nats", ""},
		storetest.OpenOffline(Open, func(s *Store) []string { return []string{s.redacted} }))
}
