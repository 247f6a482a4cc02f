package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/internal/testserver"
)

// TestPreferUnreachableStoreFailsAtOnce: tenure prefer reads the store
// once, as status and step-down do, and a store that cannot be reached
// is exit 1 with one line naming the key. It used to campaign for the
// preference without end, logging twice a second.
func TestPreferUnreachableStoreFailsAtOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	cmd := exec.CommandContext(ctx, tenureBin, "prefer", "--store", refusedStoreURL(t), "--key", "job", "b")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tenure prefer on an unreachable store still ran after 20s; stderr %q", stderr.String())
	}
	line := stderr.String()
	if code := exitCode(cmd.ProcessState); code != exitRuntime || strings.Count(line, "\n") != 1 ||
		!strings.HasPrefix(line, `tenure: cannot read key "job~tenure-prefer"`) || stdout.String() != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %d and one line: cannot read the key", code, stdout.String(), line, exitRuntime)
	}
}

// TestPreferObserverLogsFollowLogFormat: what tenure prefer logs while it
// waits for another preference to end, the store gone, follows
// --log-format, as the rest of its log does. The observer it waits with
// used to log through the default logger, in another format, and past
// --quiet.
func TestPreferObserverLogsFollowLogFormat(t *testing.T) {
	t.Parallel()
	redis := testserver.Redis(t, false)
	store := redis.URL(0)
	var out1 syncbuf.Buffer
	first := exec.Command(tenureBin, "prefer", "--store", store, "--key", "job", "--quiet", "a")
	first.Stdout = &out1
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	reapAtEnd(t, first)
	waitFor(t, func() bool { return strings.Contains(out1.String(), "job: preferring a") })
	var out2 syncbuf.Buffer
	second := exec.Command(tenureBin, "prefer", "--store", store, "--key", "job", "--log-format", "json", "b")
	second.Stdout = &out2
	logs, err := second.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	reapAtEnd(t, second)
	waitFor(t, func() bool { return strings.Contains(out2.String(), "waiting for the preference for a to end") })
	if err := redis.Stop(); err != nil {
		t.Fatal(err)
	}
	_ = first.Process.Kill()
	var seen []string
	for sc := bufio.NewScanner(logs); sc.Scan(); {
		line := sc.Text()
		seen = append(seen, line)
		var entry struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("tenure prefer --log-format json logged %q, not JSON (%v)", line, err)
		}
		if strings.Contains(entry.Msg, "observer") {
			return
		}
	}
	t.Fatalf("tenure prefer ended without logging its observer's failure: %q", seen)
}
