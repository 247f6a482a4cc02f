package compare

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/tenurehq/tenure/internal/testserver"
)

// The benchmark binary runs itself as the etcd server when these are set,
// so that the server's CPU is not the electors' CPU.
const (
	etcdChildDir    = "TENURE_COMPARE_ETCD_DIR"
	etcdChildClient = "TENURE_COMPARE_ETCD_CLIENT"
	etcdChildPeer   = "TENURE_COMPARE_ETCD_PEER"
)

// runEtcdChild serves etcd (v3.7.3, embedded) until its stdin closes, and
// returns the exit code.
func runEtcdChild() int {
	client, _ := url.Parse("http://" + os.Getenv(etcdChildClient))
	peer, _ := url.Parse("http://" + os.Getenv(etcdChildPeer))
	cfg := embed.NewConfig()
	cfg.Name = "compare"
	cfg.Dir = os.Getenv(etcdChildDir)
	cfg.ListenClientUrls = []url.URL{*client}
	cfg.AdvertiseClientUrls = []url.URL{*client}
	cfg.ListenPeerUrls = []url.URL{*peer}
	cfg.AdvertisePeerUrls = []url.URL{*peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.TickMs = 10
	cfg.ElectionMs = 50
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "panic"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start etcd:", err)
		return 1
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "etcd not ready within 30s")
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	e.Close()
	return 0
}

// etcdServer is the etcd child process.
type etcdServer struct {
	endpoint string // 127.0.0.1:PORT
}

// startEtcd runs an etcd server in a child process on free loopback ports
// and a directory of t's, stopped by t.Cleanup.
func startEtcd(t *testing.T) *etcdServer {
	t.Helper()
	s := &etcdServer{endpoint: fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		etcdChildDir+"="+t.TempDir(),
		etcdChildClient+"="+s.endpoint,
		fmt.Sprintf("%s=127.0.0.1:%d", etcdChildPeer, testserver.FreePort(t)))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start etcd child: %v", err)
	}
	exited := make(chan struct{})
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("etcd child exited before serving")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("etcd child not ready within 60s")
	}
	return s
}

// requests returns the gRPC messages etcd received so far (every unary
// request and every message on a stream, such as a lease keep-alive), from
// its /metrics on the client port.
func (s *etcdServer) requests(ctx context.Context) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.endpoint+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var total float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_msg_received_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("etcd metrics: %q: %w", line, err)
		}
		total += v
		found = true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("etcd metrics at %s have no grpc_server_msg_received_total", s.endpoint)
	}
	return int64(total), nil
}

// electionContender runs etcd's own concurrency.Election, one client and
// session (lease) per candidate, TTL in whole seconds.
type electionContender struct {
	endpoint string
	ttl      time.Duration
}

func (c *electionContender) Start(ctx context.Context, key, id string, onLead func()) (candidate, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{c.endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(c.ttl/time.Second)))
	if err != nil {
		cli.Close()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	ec := &electionCandidate{cli: cli, sess: sess, el: concurrency.NewElection(sess, "/compare-election/"+key),
		cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(ec.done)
		if err := ec.el.Campaign(runCtx, id); err != nil {
			return
		}
		onLead()
	}()
	return ec, nil
}

type electionCandidate struct {
	cli     *clientv3.Client
	sess    *concurrency.Session
	el      *concurrency.Election
	cancel  context.CancelFunc
	done    chan struct{}
	crashed bool
	once    sync.Once
}

// Release resigns, as Election's users do.
func (c *electionCandidate) Release() {
	<-c.done // Campaign returned (it has, since the candidate leads)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.el.Resign(ctx)
}

// Crash closes the client: keep-alives stop, the session's lease is not
// revoked and expires on the server.
func (c *electionCandidate) Crash() {
	c.crashed = true
	c.cli.Close()
	c.cancel()
}

func (c *electionCandidate) Stop() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
		if !c.crashed {
			_ = c.sess.Close() // revokes the lease
			c.cli.Close()
		}
	})
}
