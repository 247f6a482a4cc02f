package testserver

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Azurite's well-known development account. The key is public (it is
// printed in Azure's documentation) and only ever valid against Azurite.
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// AzuriteInstall is the command that installs Azurite where the tests look
// for it (run from the repository root).
const AzuriteInstall = "npm install --prefix .cache/azurite azurite@3.35.0"

// AzuriteServer is an Azurite blob service run for tests, listening on
// 127.0.0.1 and a free port, keeping its data in a temporary directory so
// that it survives [AzuriteServer.Restart]. Methods are safe for concurrent
// use.
type AzuriteServer struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// Endpoint is the blob service URL of the development account, such as
	// http://127.0.0.1:PORT/devstoreaccount1.
	Endpoint string

	bin, dir string

	mu   sync.Mutex
	proc *process // while it runs
}

// ConnectionString returns an Azure Storage connection string for the
// server's development account.
func (s *AzuriteServer) ConnectionString() string {
	return fmt.Sprintf("DefaultEndpointsProtocol=http;AccountName=%s;AccountKey=%s;BlobEndpoint=%s;",
		AzuriteAccount, AzuriteKey, s.Endpoint)
}

// azuriteBin finds azurite-blob: in PATH, then in
// $TENURE_AZURITE_DIR/node_modules/.bin, then in the repository's
// .cache/azurite/node_modules/.bin, where CI installs it.
func azuriteBin() string {
	var dirs []string
	if d := os.Getenv("TENURE_AZURITE_DIR"); d != "" {
		dirs = append(dirs, filepath.Join(d, "node_modules", ".bin"))
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		root := filepath.Join(filepath.Dir(file), "..", "..")
		dirs = append(dirs, filepath.Join(root, ".cache", "azurite", "node_modules", ".bin"))
	}
	return findExec("azurite-blob", dirs...)
}

// Azurite starts an Azurite blob service for t and stops it in t.Cleanup.
// When Azurite or Node.js is missing it calls [Missing]: the test is skipped
// outside CI and fails in CI.
func Azurite(t testing.TB) *AzuriteServer {
	t.Helper()
	bin := azuriteBin()
	if bin == "" {
		Missing(t, "Azurite (azurite-blob in PATH, $TENURE_AZURITE_DIR/node_modules/.bin or .cache/azurite/node_modules/.bin)", AzuriteInstall)
	}
	if _, err := exec.LookPath("node"); err != nil {
		Missing(t, "Node.js (needed by Azurite)", "apt-get install nodejs")
	}
	port := FreePort(t)
	s := &AzuriteServer{
		Port:     port,
		Endpoint: fmt.Sprintf("http://127.0.0.1:%d/%s", port, AzuriteAccount),
		bin:      bin,
		dir:      t.TempDir(),
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// start launches the process and waits until it accepts connections.
func (s *AzuriteServer) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return fmt.Errorf("testserver: Azurite on port %d is already running", s.Port)
	}
	cmd := exec.Command(s.bin,
		"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(s.Port),
		"--location", s.dir, "--skipApiVersionCheck", "--disableTelemetry", "--silent")
	log := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	addr := fmt.Sprintf("127.0.0.1:%d", s.Port)
	var err error
	s.proc, err = launch("Azurite", cmd, 30*time.Second, func() bool { return accepts(addr) }, log.String)
	return err
}

// Stop stops the server (SIGTERM, so it saves its data; SIGKILL after 10 s).
// Stopping a stopped server does nothing.
func (s *AzuriteServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *AzuriteServer) stopLocked() {
	s.proc.stop(syscall.SIGTERM, 10*time.Second)
	s.proc = nil
}

// Start starts a stopped server again on the same port and data directory.
func (s *AzuriteServer) Start(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// Restart stops the server and starts it again on the same port and data.
func (s *AzuriteServer) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.Start(t)
}
