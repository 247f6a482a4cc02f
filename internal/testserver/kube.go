package testserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/token"
)

// KubeVersion is the kube-apiserver release the tests run against.
const KubeVersion = "v1.37.2"

// KubeInstall is the command that builds kube-apiserver into the cache
// [Kube] looks in.
const KubeInstall = ".ci/kube-apiserver (builds it once into ${TENURE_CACHE:-$HOME/.cache/tenure}; or set TENURE_KUBE_APISERVER)"

// EtcdInstall is the command that installs the etcd server binary.
const EtcdInstall = "apt-get install etcd-server"

// KubeServer is a real kube-apiserver run for a test on 127.0.0.1 and a
// free port, backed by its own etcd (the apt binary) in a temporary
// directory, with RBAC authorization and static bearer tokens. It knows no
// nodes and runs no controllers: it stores and watches API objects, which
// is all a Lease needs. Methods are safe for concurrent use.
type KubeServer struct {
	// Host is the API server's https://127.0.0.1:PORT URL.
	Host string
	// CAFile is the PEM file of the server's self-signed certificate.
	CAFile string
	// AdminToken authenticates as a member of system:masters.
	AdminToken string
	// UserToken authenticates as [KubeUser], which RBAC grants nothing
	// until a test binds it a role.
	UserToken string

	bin, dir, etcdURL string
	port              int

	life lifecycle
}

// KubeUser is the name of the unprivileged user of [KubeServer.UserToken].
const KubeUser = "tenure-test"

// KubeAPIServerPath returns the kube-apiserver binary: $TENURE_KUBE_APISERVER
// if set, else the one .ci/kube-apiserver caches, or "" when neither exists.
func KubeAPIServerPath() string {
	if p := os.Getenv("TENURE_KUBE_APISERVER"); p != "" {
		return p
	}
	cache := os.Getenv("TENURE_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(home, ".cache", "tenure")
	}
	p := filepath.Join(cache, "kube-apiserver-"+KubeVersion)
	if isExec(p) {
		return p
	}
	return ""
}

// Kube starts etcd and a kube-apiserver for t, both stopped by t.Cleanup.
// Without either binary it calls [Missing] (a failure in CI). Start-up
// takes seconds (the API server bootstraps its RBAC roles before it is
// ready), so tests share one server where they can.
func Kube(t testing.TB) *KubeServer {
	t.Helper()
	bin := KubeAPIServerPath()
	if bin == "" {
		Missing(t, "kube-apiserver "+KubeVersion, KubeInstall)
	}
	if _, err := os.Stat(bin); err != nil {
		Missing(t, "kube-apiserver at "+bin+" (TENURE_KUBE_APISERVER)", KubeInstall)
	}
	etcdBin := LookPath(t, "etcd", EtcdInstall, "/usr/bin", "/usr/local/bin")
	dir := t.TempDir()
	etcdURL := startEtcd(t, etcdBin, dir)
	s := &KubeServer{
		bin:        bin,
		dir:        dir,
		etcdURL:    etcdURL,
		port:       FreePort(t),
		AdminToken: token.Hex(16),
		UserToken:  token.Hex(16),
	}
	s.Host = "https://127.0.0.1:" + strconv.Itoa(s.port)
	s.CAFile = filepath.Join(dir, "certs", "apiserver.crt")
	if err := s.prepare(); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// startEtcd runs the etcd binary on two free loopback ports in dir/etcd
// and returns its client URL once it answers /health.
func startEtcd(t testing.TB, bin, dir string) string {
	t.Helper()
	client, peer := FreePort(t), FreePort(t)
	curl := "http://127.0.0.1:" + strconv.Itoa(client)
	purl := "http://127.0.0.1:" + strconv.Itoa(peer)
	logPath := filepath.Join(dir, "etcd.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin,
		"--name", "kube", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "kube="+purl, "--initial-cluster-state", "new",
		"--log-level", "warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	healthy := func() bool {
		c := &http.Client{Timeout: time.Second}
		resp, err := c.Get(curl + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	_, output := logSays(logPath, 0, "")
	p, err := launch("etcd", cmd, 30*time.Second, healthy, output)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(syscall.SIGTERM, 10*time.Second) })
	return curl
}

// prepare writes the service-account key pair and the token file.
func (s *KubeServer) prepare() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("testserver: service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("testserver: service-account key: %w", err)
	}
	files := map[string][]byte{
		"sa.key": pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
		"sa.pub": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		// token,user,uid,"group,..."
		"tokens.csv": fmt.Appendf(nil, "%s,admin,admin,\"system:masters\"\n%s,%s,%s\n",
			s.AdminToken, s.UserToken, KubeUser, KubeUser),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(s.dir, name), b, 0o600); err != nil {
			return fmt.Errorf("testserver: %w", err)
		}
	}
	return nil
}

// Start starts the API server on its port and waits until /readyz
// answers ok (at most two minutes: the first start on a busy machine is
// slow). It is a no-op if the server runs.
func (s *KubeServer) Start() error { return s.life.start(s.launch) }

// launch runs the server once and waits until it is ready.
func (s *KubeServer) launch() (*process, error) {
	logPath := filepath.Join(s.dir, "kube-apiserver.log")
	_, output := logSays(logPath, logFrom(logPath), "")
	cmd := exec.Command(s.bin,
		"--etcd-servers", s.etcdURL,
		"--secure-port", strconv.Itoa(s.port),
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--cert-dir", filepath.Join(s.dir, "certs"),
		"--service-account-key-file", filepath.Join(s.dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(s.dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--token-auth-file", filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	ready := func() bool { return s.ready() == nil }
	return launchLogged("kube-apiserver", cmd, logPath, 2*time.Minute, ready, output)
}

// ready asks /readyz with the admin token, trusting the server's own
// certificate once it exists.
func (s *KubeServer) ready() error {
	pemCA, err := os.ReadFile(s.CAFile)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		return errors.New("no certificate in " + s.CAFile)
	}
	c := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}},
	}
	defer c.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Host+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body bytes.Buffer
	_, _ = body.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz: %s: %s", resp.Status, body.Bytes())
	}
	return nil
}

// Stop asks the API server to shut down and waits for it (killing it
// after 20 s). etcd keeps running, so [KubeServer.Start] brings back the
// same objects. It is a no-op if the server is stopped.
func (s *KubeServer) Stop() error {
	s.life.stop(syscall.SIGTERM, 20*time.Second)
	return nil
}

// Restart stops and starts the API server; its objects, kept in etcd,
// survive.
func (s *KubeServer) Restart() error {
	return s.life.restart(syscall.SIGTERM, 20*time.Second, s.launch)
}

// Kubeconfig writes a kubeconfig file for token (AdminToken or UserToken)
// into the server's directory and returns its path. Its one context,
// "test", uses namespace "default".
func (s *KubeServer) Kubeconfig(t testing.TB, token string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: test
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: test
    user: test
    namespace: default
current-context: test
`, s.Host, s.CAFile, token)
	f, err := os.CreateTemp(s.dir, "kubeconfig-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}
