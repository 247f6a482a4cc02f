package testserver

import (
	"errors"
	"fmt"
	"os"
	"testing"
)

// Shared is one server for every test of a package, for servers that take
// seconds to start: [Shared.Main], called from TestMain, starts it before
// the tests run and stops it after them; [Shared.Get] hands it to a test.
// Tests using it must not run in parallel when some stop or restart it.
type Shared[S interface{ Stop() error }] struct {
	dirPattern    string                      // for os.MkdirTemp
	start         func(dir string) (S, error) // StartX, with the server's data under dir
	missing       error                       // what start returns when the server is not installed
	what, install string                      // for [Missing]

	srv S
	err error // start's error, reported by Get
}

// SharedPostgres is a [Shared] PostgreSQL server, started by [StartPostgres].
func SharedPostgres() *Shared[*PostgresServer] {
	return &Shared[*PostgresServer]{dirPattern: "tenure-pg-", start: StartPostgres,
		missing: ErrPostgresMissing, what: "PostgreSQL", install: PostgresInstall}
}

// SharedZooKeeper is a [Shared] ZooKeeper server, started by [StartZooKeeper].
func SharedZooKeeper() *Shared[*ZKServer] {
	return &Shared[*ZKServer]{dirPattern: "tenure-zk-test-", start: StartZooKeeper,
		missing: ErrZooKeeperMissing, what: "ZooKeeper", install: ZooKeeperInstall}
}

// Main starts the server in a new temporary directory, runs m's tests,
// stops the server, removes the directory and exits with the tests'
// status. A server that fails to start does not stop the run: each test
// that asks for it with [Shared.Get] fails (or is skipped) instead.
func (s *Shared[S]) Main(m *testing.M) {
	os.Exit(s.run(m))
}

func (s *Shared[S]) run(m *testing.M) int {
	dir, err := os.MkdirTemp("", s.dirPattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	s.srv, s.err = s.start(dir)
	if s.err == nil {
		defer s.srv.Stop()
	}
	return m.Run()
}

// Get returns the server [Shared.Main] started. When it could not start, t
// is skipped (outside CI) for a server that is not installed, see
// [Missing], and fails for any other error.
func (s *Shared[S]) Get(t testing.TB) S {
	t.Helper()
	checkStart(t, s.err, s.missing, s.what, s.install)
	return s.srv
}

// checkStart calls [Missing] with what and install when err, a server's
// start error, matches missing, and fails t for any other error.
func checkStart(t testing.TB, err, missing error, what, install string) {
	t.Helper()
	if errors.Is(err, missing) {
		Missing(t, what, install)
	}
	if err != nil {
		t.Fatalf("starting %s: %v", what, err)
	}
}
