package testserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
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

	mu   sync.Mutex
	cmd  *exec.Cmd
	exit chan struct{}
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
	var pw [12]byte
	_, _ = rand.Read(pw[:])
	s := &RedisServer{
		Password:   "pw-" + hex.EncodeToString(pw[:]),
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
func (s *RedisServer) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	var offset int64
	if st, err := os.Stat(s.logPath); err == nil {
		offset = st.Size()
	}
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
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("testserver: start redis-server: %w", err)
	}
	exit := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exit) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(s.logPath)
		if int64(len(b)) > offset && bytes.Contains(b[offset:], []byte("Ready to accept connections")) {
			break
		}
		select {
		case <-exit:
			return fmt.Errorf("testserver: redis-server exited at start-up; log:\n%s", tail(b, offset))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-exit
			return fmt.Errorf("testserver: redis-server not ready within 20s; log:\n%s", tail(b, offset))
		}
	}
	s.cmd, s.exit = cmd, exit
	return nil
}

// Stop stops the server and waits for it to exit. With kill it is killed
// (SIGKILL, as a crash); otherwise it is asked to shut down (SIGTERM). It
// is a no-op if the server is stopped.
func (s *RedisServer) Stop() error { return s.stop(false) }

// Kill stops the server with SIGKILL, as a crash would.
func (s *RedisServer) Kill() error { return s.stop(true) }

func (s *RedisServer) stop(kill bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	sig := syscall.SIGTERM
	if kill {
		sig = syscall.SIGKILL
	}
	_ = s.cmd.Process.Signal(sig)
	select {
	case <-s.exit:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
	return nil
}

// Restart kills the server (a crash: only what was fsynced survives) and
// starts it again on the same port and directory.
func (s *RedisServer) Restart() error {
	if err := s.Kill(); err != nil {
		return err
	}
	return s.Start()
}
