// Package natstest runs an embedded NATS server with JetStream for tests.
// It lives apart from package testserver so that only the tests that need
// NATS link its server code.
package natstest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tenurehq/tenure/internal/testserver"
)

// Server is a NATS server embedded in the test process, with JetStream's
// file storage in a temporary directory and its client port on a free
// loopback port. It is stopped by t.Cleanup. Because it is embedded, no
// nats-server binary is needed, in CI or elsewhere.
type Server struct {
	// Addr is the client address, "127.0.0.1:PORT"; it stays the same
	// across Restart.
	Addr string
	// User and Password, when set before Start, are required of clients.
	User, Password string

	dir  string
	port int
	mu   sync.Mutex
	s    *server.Server // nil while stopped
}

// Start starts an embedded server for t and waits until it serves
// clients.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartAuth(t, "", "")
}

// StartAuth is Start with clients required to log in as user with
// password ("" for neither).
func StartAuth(t testing.TB, user, password string) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir(), port: testserver.FreePort(t), User: user, Password: password}
	s.Addr = fmt.Sprintf("127.0.0.1:%d", s.port)
	s.Start(t)
	t.Cleanup(s.Stop)
	return s
}

// URL returns nats://[user:password@]ADDR/path.
func (s *Server) URL(path string) string {
	if s.User != "" {
		return fmt.Sprintf("nats://%s:%s@%s/%s", s.User, s.Password, s.Addr, path)
	}
	return fmt.Sprintf("nats://%s/%s", s.Addr, path)
}

// Start starts the server on its storage directory and port if it is
// stopped, and waits until it serves clients.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		return
	}
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      s.port,
		JetStream: true,
		StoreDir:  s.dir,
		NoLog:     true,
		NoSigs:    true,
		Username:  s.User,
		Password:  s.Password,
	}
	var (
		srv *server.Server
		err error
	)
	// A port freed a moment ago can still be in TIME_WAIT on a restart;
	// retry briefly.
	for attempt := 0; ; attempt++ {
		if srv, err = server.NewServer(opts); err == nil {
			srv.Start()
			if srv.ReadyForConnections(10 * time.Second) {
				break
			}
			srv.Shutdown()
			err = fmt.Errorf("not ready for connections within 10s")
		}
		if attempt == 20 {
			t.Fatalf("start embedded nats-server in %s: %v", s.dir, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.s = srv
}

// Stop stops the server if it runs; it is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.s != nil {
		s.s.Shutdown()
		s.s.WaitForShutdown()
		s.s = nil
	}
}

// Restart stops the server and starts it again on the same storage
// directory and port, as a process restart would.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.Start(t)
}
