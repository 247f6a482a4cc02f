package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure/internal/termsafe"
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

// TestJSONEscapesReachNoTerminal: a holder and a value rewritten with the
// store's own client to hold a C1 control (U+009B, CSI, which terminals
// that read UTF-8 C1 controls obey as ESC [ is obeyed), Unicode bidi
// overrides and isolates, a line separator and a zero-width space are
// printed by `tenure status --json` and `tenure watch --json` as JSON
// escapes, which decode to the same strings, not raw: encoding/json
// escapes only the C0 controls, and `tenure status` without --json
// already showed them escaped.
func TestJSONEscapesReachNoTerminal(t *testing.T) {
	const holder, value = "evil\u009b2J\u202egpj.exe", "\u2066x\u2069\u2028\u200b\u0085"
	_, store := rewrittenOnRedis(t, "esc", "holder", holder, "value", value)
	status := runTenure(t, "status", "--json", "--store", store, "--key", "esc")
	out, err := newLineReader(t, "watch", "--json", "--store", store, "--key", "esc")
	if err != nil {
		t.Fatal(err)
	}
	watched, _ := out.next()
	out.interrupt()
	for what, got := range map[string]string{"status": status.stdout, "watch": watched} {
		if i := strings.IndexFunc(got, func(r rune) bool { return r != '\n' && termsafe.Unprintable(r) }); i >= 0 {
			t.Errorf("tenure %s --json printed %q raw: %q", what, []rune(got[i:])[0], got)
		}
		var rec recordJSON
		if err := json.Unmarshal([]byte(got), &rec); err != nil || rec.Holder != holder || rec.Value != value {
			t.Errorf("tenure %s --json = %q (%v); want holder %q and value %q", what, got, err, holder, value)
		}
	}
}

// TestJSONLogEscapesReachNoTerminal: --log-format json writes a holder
// that no tenure grants (a bidi override, a C1 control) as JSON escapes,
// not raw, as the text format quotes it.
func TestJSONLogEscapesReachNoTerminal(t *testing.T) {
	const holder = "a\u202eb\u009b2J\u2067"
	var buf strings.Builder
	logger, err := newLogger(&buf, "json", slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}
	logger.Warn("tenure: --exec hook failed", "leader", holder)
	got := buf.String()
	if i := strings.IndexFunc(got, func(r rune) bool { return r != '\n' && termsafe.Unprintable(r) }); i >= 0 {
		t.Errorf("the JSON log has %q raw: %q", []rune(got[i:])[0], got)
	}
	var line struct{ Leader string }
	if err := json.Unmarshal([]byte(got), &line); err != nil || line.Leader != holder {
		t.Errorf("the JSON log line %q (%v) does not decode to the leader %q", got, err, holder)
	}
}
