package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenurehq/tenure/internal/testserver"
)

// TestPeerQuiet: the peer packages log through the CLI's logger, so
// `tenure run --quiet` prints no peer log line, and without --quiet the
// peer's lines reach the CLI's log (proof that the test sees them).
func TestPeerQuiet(t *testing.T) {
	dir := t.TempDir()
	secret := peerSecret(t, dir)
	store := fmt.Sprintf("peer://?id=1&peers=1=127.0.0.1:%d&algorithm=lowest&secret-file=%s&state-dir=%s&heartbeat=20ms&timeout=100ms",
		testserver.FreePort(t), secret, dir)
	args := []string{"run", "--key", "jobs", "--ttl", "600ms", "--store", store, "--", "true"}

	loud := runTenure(t, args...)
	if loud.code != 0 || !strings.Contains(loud.stderr, "peer: elected coordinator") {
		t.Fatalf("without --quiet: code %d, want 0 and the peer's election in the log; stderr:\n%s", loud.code, loud.stderr)
	}
	quiet := runTenure(t, append([]string{"run", "--quiet"}, args[1:]...)...)
	if quiet.code != 0 || strings.Contains(quiet.stderr, "peer:") || strings.Contains(quiet.stderr, "raft") {
		t.Fatalf("with --quiet: code %d, want 0 and no peer log line; stderr:\n%s", quiet.code, quiet.stderr)
	}
}

// peerSecret writes a peer group's shared secret into dir and returns the
// file's path.
func peerSecret(t testing.TB, dir string) string {
	t.Helper()
	secret := filepath.Join(dir, "peer.secret")
	if err := os.WriteFile(secret, []byte("a-cli-test-secret-that-is-long-enough-0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return secret
}
