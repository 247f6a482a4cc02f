package torture

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/internal/testserver/etcdtest"
)

// The worker is this test binary run by `tenure run` as the leader's
// command: it reports its leadership over a connection the kernel closes
// when it dies, and writes to the fenced ledger with its term until killed.
const (
	envPresence = "TENURE_TORTURE_PRESENCE"
	envLedger   = "TENURE_TORTURE_LEDGER"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(envPresence); addr != "" {
		os.Exit(worker(addr, os.Getenv(envLedger)))
	}
	os.Exit(m.Run())
}

func worker(presence, ledger string) int {
	id, term := os.Getenv("TENURE_ID"), os.Getenv("TENURE_TERM")
	c, err := net.Dial("tcp", presence)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	fmt.Fprintf(c, "%s %s\n", id, term)
	// The connection must live as long as the process: unreferenced, the
	// garbage collector would close it and the harness would see this
	// leader stop while it still leads.
	defer runtime.KeepAlive(c)
	client := &http.Client{Timeout: time.Second}
	for {
		// The first write happens at once, so a stale leader's writes
		// are fenced off as soon as a successor has started.
		resp, err := client.Post(fmt.Sprintf("%s/append?id=%s&term=%s", ledger, id, term), "", nil)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// backend is a store as the process driver sees it.
type backend struct {
	name     string
	upstream string                   // the server's host:port; "" for the local store
	url      func(addr string) string // the store URL for a candidate reaching the server at addr
	restart  func() error             // restarts the server; nil if not possible
	env      []string                 // added to each candidate's environment (credentials)
}

// Processes is a [Driver] whose candidates are `tenure run` processes.
type Processes struct {
	Tenure  string // the tenure binary
	Backend backend
	N       int
	TTL     time.Duration
	Dir     string

	rec       *Recorder
	presence  net.Listener
	ledger    *http.Server
	ledgerURL string
	proxySrv  *toxiproxy.ApiServer

	mu      sync.Mutex
	procs   map[string]*exec.Cmd
	proxies map[string]*toxiproxy.Proxy
	stopped bool
	wg      sync.WaitGroup
}

func (d *Processes) Name() string { return d.Backend.name }

func (d *Processes) Kinds() []FaultKind {
	k := []FaultKind{FaultKill, FaultStop, FaultStopGroup}
	if d.Backend.upstream != "" {
		k = append(k, FaultPartition)
	}
	if d.Backend.restart != nil {
		k = append(k, FaultRestart)
	}
	return k
}

func (d *Processes) Start(ctx context.Context, rec *Recorder) ([]string, error) {
	d.rec, d.procs, d.proxies = rec, map[string]*exec.Cmd{}, map[string]*toxiproxy.Proxy{}
	var err error
	if d.presence, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, err
	}
	go d.acceptPresence()
	ll, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/append", rec.Ledger)
	d.ledger = &http.Server{Handler: mux}
	go d.ledger.Serve(ll)
	d.ledgerURL = "http://" + ll.Addr().String()
	if d.Backend.upstream != "" {
		d.proxySrv = toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	}
	var ids []string
	for i := range d.N {
		id := fmt.Sprintf("c%d", i+1)
		ids = append(ids, id)
		if err := d.launch(id); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

func (d *Processes) acceptPresence() {
	for {
		c, err := d.presence.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			line, err := bufio.NewReader(c).ReadString('\n')
			if err != nil {
				return
			}
			f := strings.Fields(line)
			if len(f) != 2 {
				return
			}
			term, _ := strconv.ParseUint(f[1], 10, 64)
			ended := d.rec.Began(f[0], term)
			io.Copy(io.Discard, c) // until the worker dies
			ended()
		}()
	}
}

// storeURL returns the candidate's store URL, through its own proxy when
// the backend is a server.
func (d *Processes) storeURL(id string) (string, error) {
	if d.Backend.upstream == "" {
		return d.Backend.url(""), nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.proxies[id]
	if p == nil {
		p = toxiproxy.NewProxy(d.proxySrv, id, "127.0.0.1:0", d.Backend.upstream)
		if err := p.Start(); err != nil {
			return "", err
		}
		d.proxies[id] = p
	}
	return d.Backend.url(p.Listen), nil
}

func (d *Processes) launch(id string) error {
	url, err := d.storeURL(id)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(d.Tenure, "run", "--store", url, "--key", "torture", "--id", id,
		"--ttl", d.TTL.String(), "--restart", "--", self)
	cmd.Env = append(append(os.Environ(), d.Backend.env...),
		envPresence+"="+d.presence.Addr().String(), envLedger+"="+d.ledgerURL)
	log, err := os.OpenFile(filepath.Join(d.Dir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Started under the lock, so that Stop, once it has marked the round
	// stopped, signals every process there is.
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		log.Close()
		return nil
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	d.procs[id] = cmd
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		_ = cmd.Wait()
		log.Close()
		d.relaunch(id, cmd)
	}()
	return nil
}

// relaunchDelay is how long a candidate that exited by itself stays down.
const relaunchDelay = 200 * time.Millisecond

// relaunch starts id again after its process cmd exited by itself, as a
// service manager would: `tenure run` exits 1 when it cannot read the
// store at its start (documented), which a server restart early in the
// round causes, and the round must keep its N candidates, each a process
// that later faults can reach. A process the driver killed (FaultKill,
// Stop) is not relaunched here.
func (d *Processes) relaunch(id string, cmd *exec.Cmd) {
	d.mu.Lock()
	mine := !d.stopped && d.procs[id] == cmd
	d.mu.Unlock()
	if !mine {
		return
	}
	time.Sleep(relaunchDelay)
	if err := d.launch(id); err != nil {
		fmt.Fprintf(os.Stderr, "torture: cannot start %s again: %v\n", id, err)
	}
}

// supervisor returns the pid of the process group leader under tenure pid:
// the supervisor `tenure run` starts for its child.
func supervisorGroup(pid int) int {
	out, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0
	}
	for _, f := range strings.Fields(string(out)) {
		if c, err := strconv.Atoi(f); err == nil {
			if pg, err := syscall.Getpgid(c); err == nil && pg == c {
				return c
			}
		}
	}
	return 0
}

func (d *Processes) Inject(ctx context.Context, kind FaultKind, target string) (func() error, bool, error) {
	d.mu.Lock()
	cmd := d.procs[target]
	proxy := d.proxies[target]
	d.mu.Unlock()
	switch kind {
	case FaultRestart:
		return nil, false, d.Backend.restart()
	case FaultPartition:
		for _, dir := range []string{"upstream", "downstream"} {
			js := fmt.Sprintf(`{"name":"part-%s","type":"timeout","stream":"%s","attributes":{"timeout":0}}`, dir, dir)
			if _, err := proxy.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				return nil, false, err
			}
		}
		return func() error {
			for _, dir := range []string{"upstream", "downstream"} {
				if err := proxy.Toxics.RemoveToxic(ctx, "part-"+dir); err != nil {
					return err
				}
			}
			return nil
		}, false, nil
	}
	if cmd == nil {
		return nil, false, fmt.Errorf("no process for %q", target)
	}
	pid := cmd.Process.Pid
	switch kind {
	case FaultKill:
		d.mu.Lock()
		delete(d.procs, target) // killed here: relaunch leaves it to us
		d.mu.Unlock()
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return nil, false, d.launch(target)
	case FaultStop:
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		return func() error { return cont(pid) }, false, nil
	case FaultStopGroup:
		// Freeze tenure and its child's whole group: outside the
		// assumptions (nothing can act), so only fencing protects.
		group := supervisorGroup(pid)
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		if group > 0 {
			_ = syscall.Kill(-group, syscall.SIGSTOP)
		}
		return func() error {
			if group > 0 {
				_ = syscall.Kill(-group, syscall.SIGCONT)
			}
			return cont(pid)
		}, true, nil
	}
	return nil, false, fmt.Errorf("fault %s not supported", kind)
}

// cont continues pid; a process that is gone (killed by a later fault
// meanwhile, or exited before it was stopped) has nothing to continue.
func cont(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

func (d *Processes) Stop() error {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		return nil
	}
	d.stopped = true
	for _, cmd := range d.procs {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		d.mu.Lock()
		for _, cmd := range d.procs {
			_ = cmd.Process.Kill()
		}
		d.mu.Unlock()
		<-done
	}
	// Let the last workers' connections close before the history is read.
	time.Sleep(50 * time.Millisecond)
	for _, p := range d.proxies {
		p.Stop()
	}
	d.presence.Close()
	return d.ledger.Close()
}

// buildTenure builds the CLI once per test binary.
var (
	buildOnce sync.Once
	tenureBin string
	buildErr  error
)

func tenureBinary(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tenure-torture-bin")
		if err != nil {
			buildErr = err
			return
		}
		tenureBin = filepath.Join(dir, "tenure")
		out, err := exec.Command("go", "build", "-o", tenureBin, "github.com/tenurehq/tenure/cmd/tenure").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/tenure: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return tenureBin
}

// tortureProcesses runs a round of 3 candidates with TTL ttl: 25 s by
// default, a fault after each quiet TTL, healable faults lasting 2–3 TTLs,
// and a leader due within 2 TTLs + 2 s of each heal (the lease lapses
// within a TTL; a candidate's retry backoff is at most a TTL; a process
// starts within 2 s).
func tortureProcesses(t *testing.T, b backend, ttl time.Duration) {
	tortureRound(t, b, Config{Duration: budget(t, 25*time.Second), TTL: ttl, Gap: ttl, FaultFor: ttl * 2},
		ttl*2+2*time.Second)
}

// tortureRound runs the round c (its seed chosen by [seed]) with 3
// `tenure run` candidates on b, and checks it with failoverBound.
func tortureRound(t *testing.T, b backend, c Config, failoverBound time.Duration) {
	d := &Processes{Tenure: tenureBinary(t), Backend: b, N: 3, TTL: c.TTL, Dir: t.TempDir()}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(d.Dir, "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("--- %s (last 3000 bytes):\n%s", filepath.Base(l), b[max(0, len(b)-3000):])
			}
		}
	})
	c.Seed = seed(t)
	torture(t, d, c, failoverBound)
}

func TestTortureLocal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tortureProcesses(t, backend{name: "local", url: func(string) string { return "file://" + dir }}, time.Second)
}

// Server stores: each candidate reaches the server through its own proxy.

func TestTortureEtcd(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	tortureProcesses(t, backend{
		name: "etcd", upstream: srv.Endpoint,
		url:     func(addr string) string { return "etcd://" + addr + "/torture" },
		restart: func() error { srv.Restart(t); return nil },
	}, time.Second)
}

func TestTorturePostgres(t *testing.T) {
	t.Parallel()
	srv := testserver.Postgres(t)
	tortureProcesses(t, backend{
		name: "postgres", upstream: fmt.Sprintf("127.0.0.1:%d", srv.Port),
		url: func(addr string) string {
			return fmt.Sprintf("postgres://%s:%s@%s/postgres?sslmode=disable", srv.User, srv.Password, addr)
		},
		restart: srv.Restart,
	}, time.Second)
}

func TestTortureRedis(t *testing.T) {
	t.Parallel()
	srv := testserver.Redis(t, true)
	tortureProcesses(t, backend{
		name: "redis", upstream: srv.Addr,
		url:     func(addr string) string { return fmt.Sprintf("redis://:%s@%s/0", srv.Password, addr) },
		restart: srv.Restart,
	}, time.Second)
}

func TestTortureZooKeeper(t *testing.T) {
	t.Parallel()
	srv := testserver.ZooKeeper(t)
	tortureProcesses(t, backend{
		name: "zookeeper", upstream: srv.Addr,
		url:     func(addr string) string { return "zk://" + addr + "/torture" },
		restart: srv.Restart,
	}, time.Second)
}

// TestTortureAzureBlob runs `tenure run` candidates on Azurite at TTL
// 15 s, Azure's shortest blob lease. Its default round is 110 s, about 85 s
// more than the other rounds, which run beside it; healable faults last
// 1.5–2.25 TTLs, long enough for a stopped or cut-off leader's lease to
// lapse and another candidate to lead.
//
// A leader is due within TTL + RetryInterval + 2 s of each heal: a fault's
// leader loses its lease within a TTL of the fault; a watching candidate
// sees that within a poll (200 ms) and takes it within RetryInterval
// (TTL/15); its command starts within 2 s. The quiet gap between faults,
// TTL + TTL/3, is longer than that bound, so that every heal's bound is
// checked, not skipped because the next fault came first.
//
// No server restart: Azurite keeps blobs and their metadata (so terms)
// across a restart but forgets live leases (testRecoversAfterRestart in
// store/azblob sees it), which Azure does not do. A candidate could then
// take the key at once while the leader runs until its next renewal: an
// overlap the store does not promise against, telling nothing about Azure
// (tried once: two leaders for 1.2 s, the ledger fencing off the old one's
// writes, terms still increasing).
//
// Credentials reach the candidates in AZURE_STORAGE_CONNECTION_STRING, not
// in the store URL, as the store's documentation advises.
func TestTortureAzureBlob(t *testing.T) {
	t.Parallel()
	srv := testserver.Azurite(t)
	ttl := 15 * time.Second
	tortureRound(t, backend{
		name: "azblob", upstream: fmt.Sprintf("127.0.0.1:%d", srv.Port),
		url: func(addr string) string {
			endpoint := fmt.Sprintf("http://%s/%s", addr, testserver.AzuriteAccount)
			return "azblob://torture/round?endpoint=" + url.QueryEscape(endpoint)
		},
		env: []string{"AZURE_STORAGE_CONNECTION_STRING=" + srv.ConnectionString()},
	}, Config{Duration: budget(t, 110*time.Second), TTL: ttl, Gap: ttl + ttl/3, FaultFor: ttl * 3 / 2},
		ttl+ttl/15+2*time.Second)
}

// TestCandidateThatExitsIsStartedAgain: a candidate whose `tenure run`
// exits by itself (as it does when it cannot read the store at its start,
// during a server restart early in a round) is started again, so the
// round keeps its candidates; a stop fault's heal on a process that is
// gone meanwhile is no error; and none is started after Stop.
func TestCandidateThatExitsIsStartedAgain(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "tenure")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho started\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &Processes{Tenure: fake, Backend: backend{name: "fake", url: func(string) string { return "file://" + dir }},
		N: 1, TTL: time.Second, Dir: dir}
	ids, err := d.Start(context.Background(), NewRecorder())
	if err != nil {
		t.Fatal(err)
	}
	starts := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, ids[0]+".log"))
		return strings.Count(string(b), "started\n")
	}
	deadline := time.Now().Add(10 * time.Second)
	for starts() < 3 && time.Now().Before(deadline) {
		time.Sleep(relaunchDelay)
	}
	if n := starts(); n < 3 {
		t.Fatalf("%s was started %d times in 10s; want it started again each time it exits", ids[0], n)
	}
	heal, _, err := d.Inject(context.Background(), FaultStop, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * relaunchDelay) // the stop found the script gone, or stopped it: it exits at the heal
	if err := heal(); err != nil {
		t.Errorf("healing a stop of a process that is gone: %v", err)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	n := starts()
	time.Sleep(3 * relaunchDelay)
	if m := starts(); m != n {
		t.Errorf("%s was started %d more times after Stop", ids[0], m-n)
	}
}
