package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// cluster is a set of `tenure run` candidates on one key of a local store,
// each running the worker as CMD, as the demo, the tests and the benchmark
// use it. Safe for concurrent use.
type cluster struct {
	exe      string // the tenure binary
	worker   string // a demoworker binary; "" runs `tenure __demo-worker`
	storeURL string // file:// URL of the state directory
	// storeFor, if set, gives candidate id its own store URL instead of
	// storeURL (peer members: one URL per member ID).
	storeFor func(id string) string
	key      string   // the key campaigned for
	runArgs  []string // extra `tenure run` flags (--ttl, --restart...)
	workArgs []string // extra worker flags
	events   *eventLog
	lockPath string
	stdout   io.Writer // candidates' output (nil: discarded)
	stderr   io.Writer

	mu    sync.Mutex
	procs map[string]*candidate
}

// candidate is one `tenure run` process.
type candidate struct {
	ID   string
	Cmd  *exec.Cmd
	Done chan struct{} // closed once it exited and was reaped
}

// newCluster prepares a cluster in dir (a fresh directory): the store's
// state directory, the worker FIFO and lock file live there.
func newCluster(exe, dir, key string, runArgs, workArgs []string) (*cluster, error) {
	events, err := newEventLog(filepath.Join(dir, "events"))
	if err != nil {
		return nil, err
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		events.Close()
		return nil, err
	}
	return &cluster{
		exe: exe, storeURL: "file://" + state, key: key,
		runArgs: runArgs, workArgs: workArgs,
		events: events, lockPath: filepath.Join(dir, "leader.lock"),
		procs: map[string]*candidate{},
	}, nil
}

// start starts candidate id, replacing an exited one of that name.
func (c *cluster) start(id string) (*candidate, error) {
	store := c.storeURL
	if c.storeFor != nil {
		store = c.storeFor(id)
	}
	args := append([]string{"run", "--store", store, "--key", c.key, "--id", id}, c.runArgs...)
	if c.worker != "" {
		args = append(args, "--", c.worker)
	} else {
		args = append(args, "--", c.exe, workerCmdName)
	}
	args = append(args, "--events", c.events.f.Name(), "--lock", c.lockPath)
	args = append(args, c.workArgs...)
	cmd := exec.Command(c.exe, args...)
	cmd.Stdout, cmd.Stderr = c.stdout, c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start candidate %s: %w", id, err)
	}
	p := &candidate{ID: id, Cmd: cmd, Done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.Done)
	}()
	c.mu.Lock()
	c.procs[id] = p
	c.mu.Unlock()
	return p, nil
}

// get returns candidate id.
func (c *cluster) get(id string) *candidate {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[id]
}

// signal sends sig to candidate id's tenure process.
func (c *cluster) signal(id string, sig syscall.Signal) error {
	p := c.get(id)
	if p == nil {
		return fmt.Errorf("no candidate %s", id)
	}
	return p.Cmd.Process.Signal(sig)
}

// stopAll stops every candidate: SIGCONT (for frozen ones) and SIGTERM,
// then SIGKILL for those still running after timeout. It waits for all.
func (c *cluster) stopAll(timeout time.Duration) {
	c.mu.Lock()
	procs := make([]*candidate, 0, len(c.procs))
	for _, p := range c.procs {
		procs = append(procs, p)
	}
	c.mu.Unlock()
	for _, p := range procs {
		_ = p.Cmd.Process.Signal(syscall.SIGCONT)
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for _, p := range procs {
		select {
		case <-p.Done:
		case <-t.C:
			for _, q := range procs {
				_ = q.Cmd.Process.Kill()
			}
			for _, q := range procs {
				<-q.Done
			}
			return
		}
	}
}

// close stops the candidates and the event log.
func (c *cluster) close() {
	c.stopAll(5 * time.Second)
	c.events.Close()
}
