package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/shard"
)

// TestRunDuplicateIDIsLogged: a `tenure run` started with the identity
// of the running leader of its key waits (its CMD does not start) and says
// why, once, naming the key, the identity and --id, instead of waiting
// silently as before.
func TestRunDuplicateIDIsLogged(t *testing.T) {
	store := "file://" + t.TempDir()
	start := func() *syncbuf.Buffer {
		stderr := &syncbuf.Buffer{}
		cmd := exec.Command(tenureBin, "run", "--store", store, "--key", "job", "--id", "x", "--", "sleep", "60")
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		reapAtEnd(t, cmd)
		return stderr
	}
	first := start()
	waitFor(t, func() bool { return strings.Contains(first.String(), "tenure: command started") })
	second := start()
	const warning = "tenure: the key is held by this identity under another grant: is another process running with the same --id?"
	waitFor(t, func() bool { return strings.Contains(second.String(), warning) })
	log := second.String()
	if n := strings.Count(log, warning); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, log)
	}
	for _, want := range []string{"level=WARN", "key=job", "id=x"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "tenure: command started") {
		t.Errorf("the duplicate started its CMD while the first leads:\n%s", log)
	}
}

// TestShardDuplicateIDIsLogged: a second `tenure shard` member started
// with the --id of a running one leads nothing and says why, in one
// warning naming the group, the identity and its liveness lease, instead
// of waiting silently as before.
func TestShardDuplicateIDIsLogged(t *testing.T) {
	g := newShardGroup(t, shard.Numbered(2))
	g.start(t, "a", []string{"a", "b"})
	g.awaitLeader(t, "0", "a", 0)
	g.start(t, "a", []string{"a", "b"}) // the same --id again
	second := g.stderr["a"]
	const warning = "shard: this member's liveness lease is held by its own identity under another grant"
	waitFor(t, func() bool { return strings.Contains(second.String(), warning) })
	log := second.String()
	if n := strings.Count(log, warning); n != 1 {
		t.Errorf("%d warnings, want 1:\n%s", n, log)
	}
	for _, want := range []string{"level=WARN", "group=jobs", "id=a", "key=jobs/members/a"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, "tenure: command started") {
		t.Errorf("the duplicate started a CMD while the first member runs:\n%s", log)
	}
}
