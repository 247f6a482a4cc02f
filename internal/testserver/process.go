package testserver

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
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
