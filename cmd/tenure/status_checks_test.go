package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/tenurehq/tenure/internal/testserver"
)

// `tenure status` on a Redis store says what was checked of the server's
// eviction policy, and says so loudly when the check fails (issue 9 item 7).
func TestStatusSaysWhatRedisChecked(t *testing.T) {
	for _, c := range []struct {
		policy, want string
	}{
		{"noeviction", "store check: maxmemory-policy noeviction (checked with CONFIG GET)"},
		{"allkeys-lru", "store check FAILED: "},
	} {
		srv := testserver.Redis(t, false, "--maxmemory-policy", c.policy)
		var stdout, stderr bytes.Buffer
		code := statusCmd(context.Background(), []string{"--store", srv.URL(0), "--key", "job"}, &stdout, &stderr)
		if code != exitFree {
			t.Fatalf("%s: status exit %d, stderr %s", c.policy, code, stderr.String())
		}
		out := stdout.String()
		if !strings.Contains(out, c.want) || strings.Contains(out, srv.Password) {
			t.Fatalf("%s: status printed %q, want a line with %q and no password", c.policy, out, c.want)
		}
		if c.policy != "noeviction" && !strings.Contains(out, c.policy) {
			t.Fatalf("status printed %q, want the policy %s named", out, c.policy)
		}
	}
}
