package testserver

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/token"
)

// RedisInstall is the command that installs the Redis server.
const RedisInstall = "apt-get install redis-server"

// RedisServer is a redis-server run for a test on 127.0.0.1 and a free
// port, in its own directory, with a random password (requirepass), so
// tests also exercise authentication. Methods are safe for concurrent use.
type RedisServer struct {
	// Addr is host:port.
	Addr string
	// Password is the default user's password.
	Password string
	// Persistent servers write an append-only file fsynced on every write,
	// so data (term counters) survives Restart; others keep nothing.
	Persistent bool

	bin, dir, logPath string
	port              int
	extra             []string

	life lifecycle
}

// URL returns the redis:// URL of database db, with the password.
func (s *RedisServer) URL(db int) string {
	return fmt.Sprintf("redis://:%s@%s/%d", s.Password, s.Addr, db)
}

// Redis starts a redis-server for t, stopped by t.Cleanup; persistent
// selects an fsynced append-only file (see [RedisServer.Persistent]), and
// extra arguments are passed on (such as "--rename-command", "CONFIG", ""
// to act like a managed Redis). Without the binary it calls [Missing].
func Redis(t testing.TB, persistent bool, extra ...string) *RedisServer {
	t.Helper()
	bin := LookPath(t, "redis-server", RedisInstall, "/usr/bin", "/usr/local/bin")
	s := &RedisServer{
		Password:   "pw-" + token.Hex(12),
		Persistent: persistent,
		bin:        bin,
		dir:        t.TempDir(),
		port:       FreePort(t),
		extra:      extra,
	}
	s.Addr = "127.0.0.1:" + strconv.Itoa(s.port)
	s.logPath = filepath.Join(s.dir, "redis.log")
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// Start starts the server on its port and directory and waits until it
// accepts commands. It is a no-op if the server runs.
func (s *RedisServer) Start() error { return s.life.start(s.launch) }

// launch runs the server once and waits until it is ready.
func (s *RedisServer) launch() (*process, error) {
	ready, output := logSays(s.logPath, logFrom(s.logPath), "Ready to accept connections")
	args := []string{
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--logfile", s.logPath, "--daemonize", "no",
		"--requirepass", s.Password, "--save", "",
	}
	if s.Persistent {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	cmd := exec.Command(s.bin, append(args, s.extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return launch("redis-server", cmd, 20*time.Second, ready, output)
}

// Stop stops the server and waits for it to exit. With kill it is killed
// (SIGKILL, as a crash); otherwise it is asked to shut down (SIGTERM). It
// is a no-op if the server is stopped.
func (s *RedisServer) Stop() error { return s.stop(false) }

// Kill stops the server with SIGKILL, as a crash would.
func (s *RedisServer) Kill() error { return s.stop(true) }

func (s *RedisServer) stop(kill bool) error {
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	s.life.stop(sig, 20*time.Second)
	return nil
}

// Restart kills the server (a crash: only what was fsynced survives) and
// starts it again on the same port and directory.
func (s *RedisServer) Restart() error {
	return s.life.restart(syscall.SIGKILL, 20*time.Second, s.launch)
}
