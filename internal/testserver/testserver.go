// Package testserver starts real servers (etcd, PostgreSQL, Redis, Azurite,
// ZooKeeper) for tests, each on a free loopback port in a temporary
// directory, stopped by t.Cleanup.
//
// When a server's binary is missing, a test is skipped with a message naming
// the install command, except in CI (the environment variable CI is "true"
// or "1"), where it fails: CI must run every store's suite for real.
package testserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// InCI reports whether the tests run in CI, where a missing server is a
// failure rather than a skip.
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// Missing skips t (outside CI) or fails it (in CI) because what is not
// available; install is the command that provides it.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	msg := fmt.Sprintf("%s is not available; install it with: %s", what, install)
	if InCI() {
		t.Fatal(msg + " (CI=true: a missing server fails the run)")
	}
	t.Skip(msg)
}

// started hands t a server that StartX returned with err: stopped by
// t.Cleanup, or, when err matches missing, [Missing] with what and
// install; any other error fails t.
func started[S interface{ Stop() error }](t testing.TB, s S, err, missing error, what, install string) S {
	t.Helper()
	checkStart(t, err, missing, what, install)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// LookPath finds a binary in PATH or in the extra directories, or calls
// Missing.
func LookPath(t testing.TB, name, install string, extra ...string) string {
	t.Helper()
	if p := findExec(name, extra...); p != "" {
		return p
	}
	Missing(t, name, install)
	return ""
}

// findExec returns the executable name found in PATH, else in the first of
// dirs that has it, or "" if none has.
func findExec(name string, dirs ...string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range dirs {
		if p := filepath.Join(dir, name); isExec(p) {
			return p
		}
	}
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago and
// that no earlier call in this process returned. The kernel may hand the
// same ephemeral port to two listen-and-close probes in a row, so without
// that memory a group of members could be given one address twice.
// It is safe for concurrent use.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// handedOut holds every port [freePort] has returned in this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort is [FreePort] for callers without a testing.TB.
func freePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 64 {
		port, err := probePort()
		if err != nil {
			return 0, err
		}
		if !handedOut.ports[port] {
			handedOut.ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("testserver: no free port: the kernel kept offering ports already handed out")
}

// probePort asks the kernel for a free loopback port and closes it again.
func probePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("testserver: no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr is [FreePort] as a "127.0.0.1:PORT" address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", FreePort(t))
}

// WaitTCP waits until addr accepts TCP connections, or fails t after timeout.
func WaitTCP(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("server at %s did not come up within %s: %v", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
