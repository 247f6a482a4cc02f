package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// lossyStore loses the lease at its second renewal, as a store does when
// another candidate took the key over; with after set, not before the file
// after exists (CMD wrote it), so a slow start on a busy machine cannot
// lose the lease before CMD ran.
type lossyStore struct {
	tenure.Store
	renewals atomic.Int32
	after    string
}

func (s *lossyStore) Renew(ctx context.Context, l tenure.Lease) error {
	if s.after != "" {
		if _, err := os.Stat(s.after); err != nil {
			return s.Store.Renew(ctx, l)
		}
	}
	if s.renewals.Add(1) >= 2 {
		return fmt.Errorf("%w: injected by the test", tenure.ErrLost)
	}
	return s.Store.Renew(ctx, l)
}

// injectStore has tenure run's elector use w, which wraps the store tenure
// opens (set into *inner), until the test ends. Tests that use it run
// tenure in process and not in parallel.
func injectStore(t *testing.T, inner *tenure.Store, w tenure.Store) {
	t.Helper()
	electorStore = func(s tenure.Store) tenure.Store {
		*inner = s
		return w
	}
	t.Cleanup(func() { electorStore = func(s tenure.Store) tenure.Store { return s } })
}

// runLosingLeadership runs `tenure run` in process on a memory store whose
// renewals lose the lease once pidFile exists (lossyStore), with --ttl 3s,
// --grace 100ms and CMD `sh -c script args...`. It fails t unless tenure
// exits 1, and returns tenure's stderr.
func runLosingLeadership(t *testing.T, pidFile, script string, args ...string) string {
	t.Helper()
	store := &lossyStore{after: pidFile}
	injectStore(t, &store.Store, store)
	var stdout, stderr bytes.Buffer
	argv := append([]string{"run", "--store", "memory://lost-" + t.Name(), "--key", "job", "--ttl", "3s", "--grace", "100ms", "--",
		"sh", "-c", script}, args...)
	if code := run(context.Background(), argv, &stdout, &stderr); code != exitRuntime {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitRuntime, stderr.String())
	}
	return stderr.String()
}

// TestRunLostLeadershipStubbornCMD: when leadership is lost while tenure is
// alive, CMD's group gets SIGTERM, then SIGKILL after --grace if it ignores
// it; tenure returns only once CMD is dead, and exits 1.
func TestRunLostLeadershipStubbornCMD(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "cmd.pid")
	start := time.Now()
	stderr := runLosingLeadership(t, pidFile, `trap "" TERM; echo $$ > `+pidFile+`; while :; do sleep 0.05; done`)
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("CMD never ran: %v; stderr:\n%s", err, stderr)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if alive(pid) {
		t.Fatalf("CMD (pid %d) still alive after tenure returned", pid)
	}
	for _, want := range []string{"tenure: stopping the command", "injected by the test", "outlived --grace", "leadership lost"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("log lacks %q:\n%s", want, stderr)
		}
	}
	t.Logf("lost and stopped in %s", time.Since(start).Round(time.Millisecond))
}
