package main

import (
	"bytes"
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// rangedStore accepts only 15 to 60 s, as Azure blob leases do.
type rangedStore struct{ tenure.Store }

func (rangedStore) TTLRange() (time.Duration, time.Duration) { return 15 * time.Second, time.Minute }

func init() {
	tenure.Register("ranged-test", func(context.Context, *url.URL) (tenure.Store, error) {
		return rangedStore{memory.New(nil)}, nil
	})
}

// TestRunTTLStoreRange: once the store is open, --ttl is checked against
// its own range, as a usage error naming it.
func TestRunTTLStoreRange(t *testing.T) {
	unsetEnv(t, envStore)
	for _, tc := range []struct {
		ttl  string
		code int
		want string
	}{
		{"5s", exitUsage, "--ttl 5s is out of range: want 15s to 1m0s for this store"},
		{"90s", exitUsage, "--ttl 1m30s is out of range: want 15s to 1m0s for this store"},
		{"15s", exitOK, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := runInProcess([]string{"run", "--store", "ranged-test://x", "--key", "job", "--ttl", tc.ttl, "--quiet", "--", "true"}, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("--ttl %s: code %d, stderr %q; want %d and %q", tc.ttl, code, stderr.String(), tc.code, tc.want)
		}
	}
}
