package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

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

// `tenure status` on a Redis key whose term counter was rewritten with
// redis-cli as a hash fails with one line naming the key and the Redis
// key that is of the wrong type, not the server's WRONGTYPE, and without
// the password.
func TestStatusOfWrongTypeCounter(t *testing.T) {
	srv := testserver.Redis(t, false)
	opts, err := redis.ParseURL(srv.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.HSet(context.Background(), "tenure:{job}:term", "term", "7").Err(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := statusCmd(context.Background(), []string{"--store", srv.URL(0), "--key", "job"}, &stdout, &stderr)
	msg := strings.TrimSuffix(stderr.String(), "\n")
	if code == exitOK || code == exitFree || strings.Contains(msg, "\n") || strings.Contains(msg, "WRONGTYPE") ||
		!strings.Contains(msg, `"tenure:{job}:term" is a Redis hash`) || strings.Contains(msg, srv.Password) {
		t.Fatalf("status exit %d, stderr %q; want one line naming the counter's Redis key and its type", code, msg)
	}
}
