package zk_test

import (
	"testing"

	"github.com/tenurehq/tenure/store/zk"
	"github.com/tenurehq/tenure/storetest"
)

// FuzzOpenURL: Open never panics, and with a secret planted in any secret
// position its error never contains it. The context is cancelled, so
// nothing dials: Open parses, then gives up.
func FuzzOpenURL(f *testing.F) {
	f.Add("zk://h:1/a\x00b", uint8(0), "zk", "u", "h:1", "a", "")
	f.Add("zk://h:1/?x=1", uint8(3), "zk", "", "h", "", "x=1")
	storetest.FuzzOpen(f, "zk://u:pw@127.0.0.1:2181,127.0.0.1:2182/tenure", []string{"zk", ""}, storetest.OpenOffline(zk.Open, nil))
}
