package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunAsPIDOneReapsOrphans: tenure run as a container's PID 1 (here the
// first process of a new PID namespace) adopts every orphan of the
// container, such as what a `kubectl exec` session leaves running; when
// one exits it is reaped, not left as tenure's zombie. Needs root (for
// the namespace) and util-linux's unshare and nsenter.
func TestRunAsPIDOneReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start tenure in a PID namespace of its own")
	}
	for _, tool := range []string{"unshare", "nsenter", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (apt-get install util-linux)", tool)
		}
	}
	dir := t.TempDir()
	// setsid: tenure leads its own session and process group, as a
	// container's init does (a process group outside the namespace would
	// read as 0 inside it, as the orphan's would).
	ns := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "setsid", tenureBin, "run", "--store", "file://"+dir, "--key", "job", "--quiet", "--", "sleep", "60")
	if err := ns.Start(); err != nil {
		t.Fatal(err)
	}
	nsDone := reapAtEnd(t, ns)
	// tenure is unshare's child; once it has its supervisor, it runs.
	var pid int
	var sup []int
	for deadline := time.Now().Add(wait); len(sup) == 0; {
		if kids := childrenOf(t, ns.Process.Pid); len(kids) == 1 {
			pid = kids[0]
			sup = childrenOf(t, pid)
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenure did not start its supervisor within %s", wait)
		}
		select {
		case <-nsDone:
			t.Fatal("tenure exited")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Killing PID 1 kills every process of its namespace.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })

	// A session entered from outside, in a session of its own as an exec
	// into a container is, leaves a process behind: its parent is outside
	// the namespace, so the process is orphaned to PID 1.
	enter := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--pid", "--", "sh", "-c", "sleep 0.3 & exit 0")
	enter.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if out, err := enter.CombinedOutput(); err != nil {
		t.Fatalf("nsenter: %v: %s", err, out)
	}
	var orphan int
	for _, kid := range childrenOf(t, pid) {
		if kid != sup[0] {
			orphan = kid
		}
	}
	if orphan == 0 {
		t.Fatalf("tenure (pid %d outside its namespace) adopted no orphan: children %v, the supervisor %d", pid, childrenOf(t, pid), sup[0])
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(20 * time.Millisecond) {
		f, ok := procStat(orphan)
		if !ok {
			return // exited and reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("tenure as PID 1 (pid %d outside) left its orphan %d in state %s for %s", pid, orphan, f[0], wait)
		}
	}
}

// TestNotSubreaperWarningIsLogged: when tenure cannot become a subreaper,
// the warning goes through the command's logger (it was printed as text
// before the flags were read, so --log-format json got a line that was
// not JSON), once, with the key fields of any other line.
func TestNotSubreaperWarningIsLogged(t *testing.T) {
	adopted.mu.Lock()
	adopted.err = errors.New("prctl refused")
	adopted.mu.Unlock()
	t.Cleanup(func() {
		adopted.mu.Lock()
		adopted.err = nil
		adopted.mu.Unlock()
	})
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--store", "memory://" + t.Name(), "--key", "job",
		"--log-format", "json", "--", "true"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	warned := 0
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a log line is not JSON: %q (%v)", line, err)
		}
		if msg, _ := rec["msg"].(string); strings.Contains(msg, "subreaper") {
			warned++
			if rec["level"] != "WARN" || rec["err"] != "prctl refused" {
				t.Errorf("warning %v: want level WARN and err %q", rec, "prctl refused")
			}
		}
	}
	if warned != 1 {
		t.Fatalf("%d subreaper warnings, want 1; stderr:\n%s", warned, stderr.String())
	}

	stderr.Reset()
	if code := run(context.Background(), []string{"run", "--store", "memory://" + t.Name(), "--key", "job",
		"--quiet", "--", "true"}, &stdout, &stderr); code != exitOK || stderr.Len() != 0 {
		t.Fatalf("--quiet: exit code %d, stderr %q; want 0 and nothing", code, stderr.String())
	}
}
