package main

import (
	"fmt"
	"maps"
	"net/url"
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

// peerParams returns the URL parameters every member of a loopback peer
// group of n members running alg shares, and its observers too: the
// members 1..n on free ports, the algorithm, and a secret file in dir.
func peerParams(t testing.TB, alg, dir string, n int) url.Values {
	t.Helper()
	var peers []string
	for i := 1; i <= n; i++ {
		peers = append(peers, fmt.Sprintf("%d=127.0.0.1:%d", i, testserver.FreePort(t)))
	}
	return url.Values{"peers": {strings.Join(peers, ",")}, "algorithm": {alg}, "secret-file": {peerSecret(t, dir)}}
}

// peerMembers makes c's members 1, 2 and 3 of a loopback peer group
// running alg, with their state in one temporary directory, and returns
// the group's observer URL (no id).
func peerMembers(t testing.TB, c *cluster, alg string) string {
	t.Helper()
	dir := t.TempDir()
	group := peerParams(t, alg, dir, 3)
	c.storeFor = func(id string) string {
		q := url.Values{"id": {id}, "state-dir": {dir}}
		maps.Copy(q, group)
		return "peer://?" + q.Encode()
	}
	return "peer://?" + group.Encode()
}
