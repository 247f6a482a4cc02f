package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// unsetEnv unsets the environment variable name until tb ends (an empty
// value is not the same: $TENURE_STORE set but blank is refused).
func unsetEnv(tb testing.TB, name string) {
	tb.Setenv(name, "") // restores the old value at the end
	os.Unsetenv(name)
}

// environWithout is this process's environment without the variable name,
// for a child that must not inherit it.
func environWithout(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// tenureBin is the tenure binary built once by TestMain; the tests run it
// as real processes. leanWorkerBin is the demo worker alone
// (testdata/leanworker), which the benchmarks run as CMD.
var tenureBin, leanWorkerBin string

func TestMain(m *testing.M) {
	// In-process `tenure run` tests start the test binary as their
	// supervisor: be one.
	if len(os.Args) > 1 && os.Args[1] == superviseCmdName {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 2 && os.Args[1] == countSigtermName {
		countSigterm(os.Args[2])
	}
	dir, err := os.MkdirTemp("", "tenure-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tenureBin, leanWorkerBin = filepath.Join(dir, "tenure"), filepath.Join(dir, "leanworker")
	for bin, pkg := range map[string]string{tenureBin: ".", leanWorkerBin: "./testdata/leanworker"} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", pkg, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is a finished tenure process.
type result struct {
	stdout, stderr string
	code           int
}

// runTenure runs the tenure binary to completion, failing t after a minute.
func runTenure(t testing.TB, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tenureBin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("tenure %s did not finish within a minute; stderr:\n%s", strings.Join(args, " "), stderr.String())
	}
	if err != nil && cmd.ProcessState == nil {
		t.Fatalf("tenure %s: %v", strings.Join(args, " "), err)
	}
	return result{stdout.String(), stderr.String(), exitCode(cmd.ProcessState)}
}

// startTenure starts the tenure binary; it is killed at the end of the test
// if still running. done is closed when it exited.
func startTenure(t testing.TB, stdout, stderr *bytes.Buffer, args ...string) (cmd *exec.Cmd, done chan struct{}) {
	t.Helper()
	cmd = exec.Command(tenureBin, args...)
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if stderr != nil {
		cmd.Stderr = stderr
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, reapAtEnd(t, cmd)
}

// reapAtEnd waits for the started cmd in the background and returns a
// channel closed once it exited; when the test ends, cmd is resumed (if
// stopped), killed and waited for.
func reapAtEnd(t testing.TB, cmd *exec.Cmd) chan struct{} {
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-done
	})
	return done
}

// startPiped starts cmd with its standard output piped to the reader it
// returns; when the test ends, cmd gets the signal stop and is waited for.
func startPiped(t testing.TB, cmd *exec.Cmd, stop syscall.Signal) io.Reader {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Signal(stop); _ = cmd.Wait() })
	return out
}

// waitDone waits for a started process to exit, failing t after d.
func waitDone(t testing.TB, done <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %s", what, d)
	}
}

// testCluster is a cluster of candidates in t.TempDir(), closed at the end
// of the test.
func testCluster(t testing.TB, key string, runArgs, workArgs []string) *cluster {
	t.Helper()
	c, err := newCluster(tenureBin, t.TempDir(), key, runArgs, workArgs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return c
}

// startCandidates starts the candidates ids of c and waits for the first
// CMD to start: it returns that start and its index in c's events.
func startCandidates(t testing.TB, c *cluster, ids ...string) (workerEvent, int) {
	t.Helper()
	for _, id := range ids {
		if _, err := c.start(id); err != nil {
			t.Fatal(err)
		}
	}
	leader, i, ok := c.events.nextStart(0, wait)
	if !ok {
		t.Fatal("no leader")
	}
	return leader, i
}

// alive reports whether process pid exists (and is not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 {
		return s[i+2] != 'Z'
	}
	return true
}

// pipedCmd is a started tenure process whose stdout is a pipe.
type pipedCmd struct {
	cmd    *exec.Cmd
	stdout io.Reader
}

// startTenureWith starts tenure with stdout piped; it is killed at the end
// of the test if still running. done is closed when it exited.
func startTenureWith(t testing.TB, args ...string) (*pipedCmd, chan struct{}) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	cmd := exec.Command(tenureBin, args...)
	cmd.Stdout = w
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	return &pipedCmd{cmd: cmd, stdout: r}, reapAtEnd(t, cmd)
}

// afterWait fires after wait.
func afterWait() <-chan time.Time { return time.After(wait) }

// loggedCmd is a started tenure process whose log (stderr) is read line
// by line.
type loggedCmd struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
	log   []string // the lines read so far
}

// startLogged starts tenure with args, stdout to stdout (if not nil) and
// stderr piped for awaitLog; it is killed at the end of the test if still
// running. done is closed when it exited.
func startLogged(t testing.TB, stdout io.Writer, args ...string) (*loggedCmd, chan struct{}) {
	t.Helper()
	cmd := exec.Command(tenureBin, args...)
	cmd.Stdout = stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return &loggedCmd{cmd: cmd, lines: bufio.NewScanner(stderr)}, reapAtEnd(t, cmd)
}

// awaitLog reads the log until a line contains s, and returns that line.
// It fails t if the process ends first; one that says nothing is killed
// after wait.
func (c *loggedCmd) awaitLog(t testing.TB, s string) string {
	t.Helper()
	timer := time.AfterFunc(wait, func() { _ = c.cmd.Process.Kill() })
	defer timer.Stop()
	for c.lines.Scan() {
		c.log = append(c.log, c.lines.Text())
		if strings.Contains(c.lines.Text(), s) {
			return c.lines.Text()
		}
	}
	t.Fatalf("tenure %s ended without logging %q: %q", c.cmd.Args[1], s, c.log)
	return ""
}

// readLog reads the rest of the log, until the process closes it.
func (c *loggedCmd) readLog() []string {
	for c.lines.Scan() {
		c.log = append(c.log, c.lines.Text())
	}
	return c.log
}
