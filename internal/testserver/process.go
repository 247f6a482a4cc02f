package testserver

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is one run of a server's binary, started by [launch].
type process struct {
	cmd   *exec.Cmd
	exit  chan struct{} // closed once cmd has exited
	group bool          // signals go to cmd's process group (Setpgid)
}

// launch starts cmd and waits up to timeout until ready reports true,
// checking every 20 ms. If cmd exits first, or the time is up (then it is
// killed), the error names the server and ends with its output so far, as
// output returns it.
func launch(name string, cmd *exec.Cmd, timeout time.Duration, ready func() bool, output func() string) (*process, error) {
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testserver: start %s: %w", name, err)
	}
	p := &process{cmd: cmd, exit: make(chan struct{}), group: cmd.SysProcAttr != nil && cmd.SysProcAttr.Setpgid}
	go func() { _ = cmd.Wait(); close(p.exit) }()
	deadline := time.Now().Add(timeout)
	for !ready() {
		select {
		case <-p.exit:
			return nil, fmt.Errorf("testserver: %s exited at start-up; output:\n%s", name, output())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.signal(syscall.SIGKILL)
			<-p.exit
			return nil, fmt.Errorf("testserver: %s not ready within %s; output:\n%s", name, timeout, output())
		}
	}
	return p, nil
}

// launchLogged is [launch] with cmd's standard output and error appended
// to the log file at logPath, which it creates if need be.
func launchLogged(name string, cmd *exec.Cmd, logPath string, timeout time.Duration, ready func() bool, output func() string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("testserver: %w", err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	return launch(name, cmd, timeout, ready, output)
}

// lifecycle is what every server that stops and starts again keeps: its
// running process, behind a lock that makes Start, Stop and Restart safe
// for concurrent use.
type lifecycle struct {
	mu   sync.Mutex
	proc *process // nil while stopped
}

// start calls launch and keeps the process it returns, unless one runs
// already: then it does nothing.
func (l *lifecycle) start(launch func() (*process, error)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.proc != nil {
		return nil
	}
	p, err := launch()
	if err != nil {
		return err
	}
	l.proc = p
	return nil
}

// stop sends sig to the running process and waits for it to exit, killing
// it after grace. It does nothing while the server is stopped.
func (l *lifecycle) stop(sig syscall.Signal, grace time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.proc.stop(sig, grace)
	l.proc = nil
}

// restart is stop and then start: the server is down in between.
func (l *lifecycle) restart(sig syscall.Signal, grace time.Duration, launch func() (*process, error)) error {
	l.stop(sig, grace)
	return l.start(launch)
}

// isExec reports whether p is a regular file someone may execute.
func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func (p *process) signal(sig syscall.Signal) {
	if p.group {
		_ = syscall.Kill(-p.cmd.Process.Pid, sig)
		return
	}
	_ = p.cmd.Process.Signal(sig)
}

// stop sends sig and waits for the process to exit, killing it after grace.
// A nil process is already stopped.
func (p *process) stop(sig syscall.Signal, grace time.Duration) {
	if p == nil {
		return
	}
	p.signal(sig)
	select {
	case <-p.exit:
	case <-time.After(grace):
		p.signal(syscall.SIGKILL)
		<-p.exit
	}
}

// logFrom returns the size of the log file at path (0 if it does not
// exist), so that a start can look only at what it writes.
func logFrom(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

// logSays returns a readiness check that the log file at path contains
// marker past offset, and the log past offset for errors.
func logSays(path string, offset int64, marker string) (ready func() bool, output func() string) {
	since := func() []byte {
		b, _ := os.ReadFile(path)
		if int64(len(b)) > offset {
			return b[offset:]
		}
		return nil
	}
	return func() bool { return bytes.Contains(since(), []byte(marker)) },
		func() string { return string(since()) }
}

// accepts reports whether addr accepts TCP connections.
func accepts(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
