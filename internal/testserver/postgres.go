package testserver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/token"
)

// PostgresInstall is the command that installs the PostgreSQL server.
const PostgresInstall = "apt-get install postgresql"

// ErrPostgresMissing is returned by [StartPostgres] when the PostgreSQL
// server binaries (initdb, postgres) cannot be found.
var ErrPostgresMissing = errors.New("testserver: PostgreSQL binaries (initdb, postgres) not found")

// PostgresServer is a PostgreSQL server run for tests: a fresh cluster in its
// own directory, listening on 127.0.0.1 and a free port, with fsync off. Its
// superuser has a random password, so tests also exercise password
// authentication. Methods are safe for concurrent use.
type PostgresServer struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// User and Password are the superuser's credentials.
	User, Password string

	bin, data, sock, logPath string
	cred                     *syscall.Credential

	life lifecycle
}

// URL returns a postgres:// URL for the database "postgres" with the
// superuser's credentials.
func (s *PostgresServer) URL() string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", s.User, s.Password, s.Port)
}

// postgresBinDir finds the directory holding initdb and postgres.
func postgresBinDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs := []string{"/usr/local/bin"}
	versions, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(versions)))
	dirs = append(dirs, versions...)
	for _, d := range dirs {
		if isExec(filepath.Join(d, "postgres")) && isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", ErrPostgresMissing
}

// StartPostgres creates a cluster under dir (which must exist and be empty)
// and starts it. PostgreSQL refuses to run as root, so when the test runs as
// root the server runs as the OS user "postgres" and dir is handed to it.
// It returns [ErrPostgresMissing] when the binaries are not installed. Stop
// the server with [PostgresServer.Stop].
func StartPostgres(dir string) (*PostgresServer, error) {
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	s := &PostgresServer{
		User:     "tenure",
		Password: "pw-" + token.Hex(12),
		bin:      bin,
		data:     filepath.Join(dir, "data"),
		sock:     filepath.Join(dir, "sock"),
		logPath:  filepath.Join(dir, "postgres.log"),
	}
	for _, d := range []string{s.data, s.sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("testserver: running as root, PostgreSQL needs the OS user \"postgres\" (useradd --system postgres): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		// The server must reach its directories through dir's parents.
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, err
		}
		for _, p := range []string{dir, s.data, s.sock} {
			if err := os.Chown(p, uid, gid); err != nil {
				return nil, err
			}
		}
	}
	pwFile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwFile, []byte(s.Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if s.cred != nil {
		if err := os.Chown(pwFile, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return nil, err
		}
	}
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", s.data, "-U", s.User,
		"--pwfile="+pwFile, "--auth-local=trust", "--auth-host=scram-sha-256",
		"--no-sync", "--no-instructions", "-E", "UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("testserver: initdb: %v\n%s", err, out)
	}
	_ = os.Remove(pwFile)
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s.Port = port
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the server on its data directory and port, and waits until
// it accepts connections. It is a no-op if the server runs.
func (s *PostgresServer) Start() error { return s.life.start(s.launch) }

// launch runs the server once and waits until it is ready.
func (s *PostgresServer) launch() (*process, error) {
	ready, output := logSays(s.logPath, logFrom(s.logPath), "ready to accept connections")
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data, "-k", s.sock,
		"-p", strconv.Itoa(s.Port), "-h", "127.0.0.1", "-F",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	return launchLogged("postgres", cmd, s.logPath, 30*time.Second, ready, output)
}

// Stop shuts the server down ("fast" shutdown: connections are closed, data
// is checkpointed) and waits for it to exit. It is a no-op if it is stopped.
func (s *PostgresServer) Stop() error {
	s.life.stop(syscall.SIGINT, 30*time.Second)
	return nil
}

// Restart stops the server and starts it again on the same data and port.
func (s *PostgresServer) Restart() error {
	return s.life.restart(syscall.SIGINT, 30*time.Second, s.launch)
}

// Postgres starts a PostgreSQL server for t in a fresh directory, stopped
// by t.Cleanup. Without the binaries it calls [Missing]. Packages whose tests
// share one server start it with [StartPostgres] from TestMain instead.
func Postgres(t testing.TB) *PostgresServer {
	t.Helper()
	dir, err := os.MkdirTemp("", "tenure-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	s, err := StartPostgres(dir)
	return started(t, s, err, ErrPostgresMissing, "PostgreSQL", PostgresInstall)
}
