package zk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/zk"
)

// TestOpenRefusesBadPaths: a path ZooKeeper would refuse, or one inside
// its own /zookeeper tree (its quotas and configuration), is a bad URL,
// refused before anything dials, naming the path; a path that merely
// starts with the same letters is fine.
func TestOpenRefusesBadPaths(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing dials
	for _, tc := range []struct{ url, want string }{
		{"zk://127.0.0.1:1/zookeeper", "reserves"},
		{"zk://127.0.0.1:1/zookeeper/tenure", "reserves"},
		{"zk://127.0.0.1:1/a/../zookeeper/x", "reserves"},
		{"zk://127.0.0.1:1/a%00b", "characters"},
	} {
		_, err := zk.Open(ctx, tc.url)
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v; want ErrInvalid saying %q", tc.url, err, tc.want)
		}
	}
	// Parsed and accepted, it then gives up on the cancelled context.
	if _, err := zk.Open(ctx, "zk://127.0.0.1:1/zookeeper-leases"); !errors.Is(err, context.Canceled) {
		t.Errorf("Open of /zookeeper-leases = %v; want it accepted (then context.Canceled)", err)
	}
}
