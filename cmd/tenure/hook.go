package main

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
)

// execFlagUsage is the usage of tenure watch --exec.
const execFlagUsage = "run `CMD` (with /bin/sh -c) on each leadership change, with TENURE_KEY, TENURE_LEADER, TENURE_TERM and TENURE_VALUE in its environment; one run at a time, the latest state wins"

// hookFlag is the value of --exec: a command for /bin/sh -c, refused when
// empty or blank.
type hookFlag string

func (f *hookFlag) String() string { return string(*f) }

// Set implements [flag.Value].
func (f *hookFlag) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("it must be a command, not empty")
	}
	*f = hookFlag(s)
	return nil
}

// hookStopGrace is how long a hook being stopped (tenure watch stops, or
// the run outlived --exec-timeout) has, after SIGTERM to its process
// group, before the group is killed.
const hookStopGrace = 5 * time.Second

// defaultHookTimeout is the default of --exec-timeout. Runs are one at a
// time, so a run that hangs (a DNS API that never answers) would hold
// back every later state for good; a hook that sets a virtual IP or a
// record takes seconds.
const defaultHookTimeout = time.Minute

const execTimeoutUsage = "stop a run of --exec's CMD still going after `DUR` (SIGTERM to its process group, SIGKILL 5s later), so that the next state can run; 0: no limit"

// hook runs a shell command on leadership changes for tenure watch --exec.
// Runs are serialized: while one runs, changes only replace the pending
// state, so the next run sees the newest state and the ones in between are
// skipped. The watch hands it states with [hook.notify], which never
// blocks, so a slow or hung hook never delays the watch's output. Create it
// with [newHook]; safe for concurrent use.
type hook struct {
	cmd     string // given to /bin/sh -c; never logged: it may hold a token
	key     string
	timeout time.Duration // of one run; 0: none
	out     io.Writer     // the hook's stdout and stderr: tenure watch's stderr
	logger  *slog.Logger

	mu      sync.Mutex
	pending *tenure.Record // the newest state not yet run, nil if none
	wake    chan struct{}  // buffered 1: a state is pending
	done    chan struct{}  // closed when run returns
}

// newHook returns a hook running cmd for key, and starts its runner, which
// stops when ctx is done: a run in progress then gets SIGTERM (its whole
// process group), SIGKILL after hookStopGrace, and pending states are
// dropped. A run still going after timeout (if not 0) is stopped the same
// way, and the next pending state runs. Wait for it with [hook.wait].
func newHook(ctx context.Context, cmd, key string, timeout time.Duration, out io.Writer, logger *slog.Logger) *hook {
	h := &hook{cmd: cmd, key: key, timeout: timeout, out: out, logger: logger,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go h.run(ctx)
	return h
}

// notify makes r the state the next run sees, replacing any pending one.
// It never blocks.
func (h *hook) notify(r tenure.Record) {
	h.mu.Lock()
	h.pending = &r
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default: // a wake-up is already pending; it will see r
	}
}

// wait blocks until the runner has stopped (after ctx is done and the run
// in progress, if any, has ended).
func (h *hook) wait() { <-h.done }

// run runs the pending state, one at a time, until ctx is done.
func (h *hook) run(ctx context.Context) {
	defer close(h.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		}
		h.mu.Lock()
		r := h.pending
		h.pending = nil
		h.mu.Unlock()
		if r != nil && ctx.Err() == nil {
			h.once(ctx, *r)
		}
	}
}

// once runs the command for r and logs its failure: the exit status or
// the reason it could not start, never the command line (it may hold a
// secret). A run that outlives h.timeout, or ctx, is stopped: SIGTERM to
// its process group, and after hookStopGrace SIGKILL to what is left of
// the group.
func (h *hook) once(ctx context.Context, r tenure.Record) {
	rctx, cancel := ctx, context.CancelFunc(func() {})
	if h.timeout > 0 {
		rctx, cancel = context.WithTimeout(ctx, h.timeout)
	}
	defer cancel()
	// The holder and value as tenure's own Acquire would check them (an
	// empty holder is "no leader"; the TTL is not the record's concern).
	if err := tenure.CheckClaim(h.key, tenure.Claim{Identity: cmp.Or(r.Holder, "none"), TTL: time.Second, Value: r.Value}); err != nil {
		// No tenure writes such a record: a holder or value with control
		// characters (a line break into a script's output, a NUL that
		// exec refuses), invalid UTF-8 or over the size limits came from
		// outside. The hook would get it raw in its environment.
		h.logger.Warn("tenure: --exec hook not run: the record was not written by tenure", "key", h.key, "term", r.Term, "err", err)
		return
	}
	cmd := exec.CommandContext(rctx, "/bin/sh", "-c", h.cmd)
	cmd.Env = append(os.Environ(),
		"TENURE_KEY="+h.key,
		"TENURE_LEADER="+r.Holder,
		"TENURE_TERM="+strconv.FormatUint(r.Term, 10),
		"TENURE_VALUE="+r.Value)
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = h.out, h.out
	// Its own process group, so that stopping the run stops whatever the
	// shell started, too. If tenure itself is killed, the shell is killed
	// with it (Pdeathsig), so that a stale run cannot go on past the
	// watch, and alongside the next watch's runs, once tenure is restarted.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = hookStopGrace
	began := time.Now()
	err := cmd.Run()
	if rctx.Err() != nil && cmd.Process != nil {
		// Stopped: the shell is gone (killed after WaitDelay if need be);
		// kill what it left in its group, which ignored SIGTERM.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	switch {
	case err == nil || ctx.Err() != nil:
		return
	case rctx.Err() != nil:
		h.logger.Warn("tenure: --exec hook timed out; stopped it", "key", h.key, "leader", r.Holder, "term", r.Term,
			"timeout", h.timeout)
		return
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		// Could not start (no /bin/sh?): err names the program, not the
		// command line.
		h.logger.Error("tenure: --exec hook could not run", "key", h.key, "leader", r.Holder, "term", r.Term, "err", err)
		return
	}
	h.logger.Warn("tenure: --exec hook failed", "key", h.key, "leader", r.Holder, "term", r.Term,
		"status", exit.ProcessState.String(), "took", time.Since(began).Round(time.Millisecond))
}
