package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure/internal/testserver"
)

// rewrittenOnRedis starts a Redis server, has a `tenure run` lead key on
// it (TTL 30 s), then sets the fields of the key's lease hash (field,
// value, ...) with the store's own client, as redis-cli HSET would. It
// returns the server and the store URL.
func rewrittenOnRedis(t *testing.T, key string, fields ...any) (*testserver.RedisServer, string) {
	t.Helper()
	srv := testserver.Redis(t, false)
	store := srv.URL(0)
	holdKey(t, store, key, "--ttl", "30s")
	opts, err := redis.ParseURL(store)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.HSet(context.Background(), "tenure:{"+key+"}:lease", fields...).Err(); err != nil {
		t.Fatal(err)
	}
	return srv, store
}

// TestHolderEscapesReachNoTerminal: a holder rewritten with the store's own
// client (redis-cli HSET) to hold terminal escape sequences is printed
// quoted by `tenure status` and `tenure watch`, not raw: raw, the escape
// sequences would drive the operator's terminal (here: set its title and
// clear the screen); so is it by `tenure step-down`, which names the leader
// it asked. tenure itself grants no such identity.
func TestHolderEscapesReachNoTerminal(t *testing.T) {
	_, store := rewrittenOnRedis(t, "esc", "holder", "evil\x1b]0;pwned\a\x1b[2J")
	status := runTenure(t, "status", "--store", store, "--key", "esc")
	out, err := newLineReader(t, "watch", "--store", store, "--key", "esc")
	if err != nil {
		t.Fatal(err)
	}
	watched, _ := out.next()
	out.interrupt()
	stepDown := runTenure(t, "step-down", "--store", store, "--key", "esc", "--no-wait")
	if stepDown.code != exitOK {
		t.Errorf("step-down: exit %d, stderr %q", stepDown.code, stepDown.stderr)
	}
	if strings.ContainsAny(stepDown.stdout+stepDown.stderr, "\x1b\a") {
		t.Errorf("tenure step-down printed the escape sequences raw: %q", stepDown.stdout)
	}
	for what, got := range map[string]string{"status": status.stdout, "watch": watched} {
		if strings.ContainsAny(got, "\x1b\a") {
			t.Errorf("tenure %s printed the escape sequences raw: %q", what, got)
		}
		if !strings.Contains(got, `"evil\x1b]0;pwned\a\x1b[2J" leads`) {
			t.Errorf("tenure %s does not show the holder quoted: %q", what, got)
		}
	}
}

// TestErrorEscapesReachNoTerminal: a record rewritten with the store's own
// client so that it no longer decodes (its term is text holding terminal
// escape sequences) makes `tenure status` fail with one line on stderr
// that shows the bytes quoted, not raw, and a non-zero exit.
func TestErrorEscapesReachNoTerminal(t *testing.T) {
	srv, store := rewrittenOnRedis(t, "esc", "term", "1\x1b]0;pwned\a\x1b[2J")
	status := runTenure(t, "status", "--store", store, "--key", "esc")
	if status.code == 0 {
		t.Fatalf("tenure status on a corrupt record exited 0: %q", status.stdout)
	}
	if strings.ContainsAny(status.stderr, "\x1b\a") || strings.Count(status.stderr, "\n") != 1 {
		t.Fatalf("tenure status printed the escape sequences raw or on several lines: %q", status.stderr)
	}
	if strings.Contains(status.stderr, srv.Password) {
		t.Fatalf("tenure status error quotes the password: %q", status.stderr)
	}
}

// TestHugeHolderIsCut: a holder and a value of 4 MiB each, written with
// redis-cli HSET, are shown by `tenure status` cut to a readable length
// with their size, not printed whole.
func TestHugeHolderIsCut(t *testing.T) {
	huge := strings.Repeat("h", 4<<20)
	_, store := rewrittenOnRedis(t, "huge", "holder", huge, "value", huge)
	status := runTenure(t, "status", "--store", store, "--key", "huge")
	if status.code != 0 || len(status.stdout) > 4096 || strings.Count(status.stdout, "(4194304 bytes)") != 2 {
		t.Fatalf("tenure status of a 4 MiB holder and value: exit %d, %d bytes: %.300q", status.code, len(status.stdout), status.stdout)
	}
}
