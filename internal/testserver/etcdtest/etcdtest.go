// Package etcdtest runs an embedded etcd server for tests. It lives apart
// from package testserver so that only the tests that need etcd link its
// server code.
package etcdtest

import (
	"fmt"
	"github.com/tenurehq/tenure/internal/testserver"
	"net/url"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Server is a single-member etcd server embedded in the test process,
// with its data in a temporary directory and its client and peer URLs on
// free loopback ports. It is stopped by t.Cleanup. Because it is embedded,
// no etcd binary is needed, in CI or elsewhere.
type Server struct {
	// Endpoint is the client address, "127.0.0.1:PORT"; it stays the same
	// across Restart.
	Endpoint string

	maxTxnOps uint // --max-txn-ops; 0 for etcd's default (128)

	dir       string
	clientURL url.URL
	peerURL   url.URL
	mu        sync.Mutex
	e         *embed.Etcd // nil while stopped
}

// Start starts an embedded etcd server for t (fast raft timing: 10 ms ticks,
// 50 ms elections, no fsync) and waits until it serves clients.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, 0)
}

// StartWith is Start with the server's --max-txn-ops set to maxTxnOps
// (0: etcd's default).
func StartWith(t testing.TB, maxTxnOps uint) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir(), maxTxnOps: maxTxnOps}
	s.clientURL = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))}
	s.peerURL = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))}
	s.Endpoint = s.clientURL.Host
	s.Start(t)
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server on its data directory and ports if it is
// stopped, and waits until it serves clients.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		return
	}
	cfg := embed.NewConfig()
	cfg.Name = "tenure-test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = 10
	cfg.ElectionMs = 50
	cfg.UnsafeNoFsync = true
	if s.maxTxnOps > 0 {
		cfg.MaxTxnOps = s.maxTxnOps
	}
	cfg.LogLevel = "panic" // its shutdown logs errors that are not
	var (
		e   *embed.Etcd
		err error
	)
	// A port freed a moment ago can still be in TIME_WAIT on a restart;
	// retry briefly.
	for attempt := 0; ; attempt++ {
		if e, err = embed.StartEtcd(cfg); err == nil || attempt == 20 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("start embedded etcd in %s: %v", s.dir, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Server.Stop()
		e.Close()
		t.Fatalf("embedded etcd did not become ready within 30s")
	}
	s.e = e
}

// Stop stops the server if it runs; it is safe to call more than once.
// Close clients first, or the server waits for them for several seconds.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		s.e.Close()
		<-s.e.Server.StopNotify()
		s.e = nil
	}
}

// Restart stops the server and starts it again on the same data directory
// and ports, as a process restart would.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.Start(t)
}
