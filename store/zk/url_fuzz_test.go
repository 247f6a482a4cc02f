package zk_test

import (
	"context"
	"testing"

	"github.com/tenurehq/tenure/store/zk"
	"github.com/tenurehq/tenure/storetest"
)

// FuzzOpenURL: Open never panics, and with a secret planted in any secret
// position its error never contains it. The context is cancelled, so
// nothing dials: Open parses, then gives up.
func FuzzOpenURL(f *testing.F) {
	for _, s := range storetest.SecretSeeds("zk", "") {
		f.Add("zk://u:pw@127.0.0.1:2181,127.0.0.1:2182/tenure", s.Form, s.Scheme, s.User, s.Host, s.Path, s.Extra)
	}
	f.Add("zk://h:1/a\x00b", uint8(0), "zk", "u", "h:1", "a", "")
	f.Add("zk://h:1/?x=1", uint8(3), "zk", "", "h", "", "x=1")
	f.Fuzz(func(t *testing.T, raw string, form uint8, scheme, user, host, path, extra string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if s, err := zk.Open(ctx, raw); err == nil {
			s.Close()
		}
		in := storetest.SecretURL(form, scheme, user, host, path, extra)
		if s, err := zk.Open(ctx, in); err != nil {
			storetest.NoSecret(t, in, err.Error())
		} else {
			s.Close()
		}
	})
}
