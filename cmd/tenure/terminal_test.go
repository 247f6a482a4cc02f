package main

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure/internal/testserver"
)

// TestHolderEscapesReachNoTerminal: a holder rewritten with the store's own
// client (redis-cli HSET) to hold terminal escape sequences is printed
// quoted by `tenure status` and `tenure watch`, not raw: raw, the escape
// sequences would drive the operator's terminal (here: set its title and
// clear the screen). tenure itself grants no such identity.
func TestHolderEscapesReachNoTerminal(t *testing.T) {
	srv := testserver.Redis(t, false)
	store := srv.URL(0)
	holdKey(t, store, "esc", "--ttl", "30s")
	opts, err := redis.ParseURL(store)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	const evil = "evil\x1b]0;pwned\a\x1b[2J"
	if err := rdb.HSet(context.Background(), "tenure:{esc}:lease", "holder", evil).Err(); err != nil {
		t.Fatal(err)
	}
	status := runTenure(t, "status", "--store", store, "--key", "esc")
	out, err := newLineReader(t, "watch", "--store", store, "--key", "esc")
	if err != nil {
		t.Fatal(err)
	}
	watched, _ := out.next()
	out.interrupt()
	for what, got := range map[string]string{"status": status.stdout, "watch": watched} {
		if strings.ContainsAny(got, "\x1b\a") {
			t.Errorf("tenure %s printed the escape sequences raw: %q", what, got)
		}
		if !strings.Contains(got, `"evil\x1b]0;pwned\a\x1b[2J" leads`) {
			t.Errorf("tenure %s does not show the holder quoted: %q", what, got)
		}
	}
}
