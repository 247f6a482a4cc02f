package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/syncbuf"
	"golang.org/x/sys/unix"
)

// fifoLines collects the lines written to a FIFO, which it holds open
// read-write so that writers never block on opening it.
type fifoLines struct {
	f     *os.File
	lines chan string
}

func newFIFOLines(t *testing.T, path string) *fifoLines {
	t.Helper()
	if err := unix.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	l := &fifoLines{f: f, lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			l.lines <- sc.Text()
		}
	}()
	return l
}

// next returns the next line, failing t if none comes within wait.
func (l *fifoLines) next(t *testing.T, what string) string {
	t.Helper()
	select {
	case s := <-l.lines:
		return s
	case <-time.After(wait):
		t.Fatalf("no %s within %s", what, wait)
		return ""
	}
}

// hookWatch is a running tenure watch --json --exec.
type hookWatch struct {
	cmd    *exec.Cmd
	lines  chan recordJSON
	stderr string // a file
}

// startHookWatch starts tenure watch --json --exec hookCmd on key, with
// the extra flags.
func startHookWatch(t *testing.T, store, key, hookCmd string, extra ...string) *hookWatch {
	t.Helper()
	w := &hookWatch{lines: make(chan recordJSON, 100), stderr: filepath.Join(t.TempDir(), "stderr")}
	errf, err := os.Create(w.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	w.cmd = exec.Command(tenureBin, append([]string{"watch", "--store", store, "--key", key, "--json", "--exec", hookCmd}, extra...)...)
	w.cmd.Stderr = errf
	out := startPiped(t, w.cmd, syscall.SIGKILL)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var j recordJSON
			if json.Unmarshal(sc.Bytes(), &j) == nil {
				w.lines <- j
			}
		}
		close(w.lines)
	}()
	return w
}

// expect waits for the watch's next line and checks its holder.
func (w *hookWatch) expect(t *testing.T, holder string) recordJSON {
	t.Helper()
	select {
	case j, ok := <-w.lines:
		if !ok {
			t.Fatal("tenure watch exited")
		}
		if j.Holder != holder {
			t.Fatalf("watch printed %+v, want holder %q", j, holder)
		}
		return j
	case <-time.After(wait):
		t.Fatalf("tenure watch printed nothing within %s (waiting for holder %q)", wait, holder)
	}
	return recordJSON{}
}

// stopHolder ends a holdKey process; it releases the key.
func stopHolder(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// TestWatchExecHook runs tenure watch --exec with a hook that blocks until
// the test releases it: the watch prints every change while the hook
// blocks; the changes seen meanwhile are coalesced into one run with the
// newest state; the environment carries the key, leader, term and value;
// runs never overlap; a failing run is logged without the command line,
// and the watch and later runs go on.
func TestWatchExecHook(t *testing.T) {
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "store")
	log := newFIFOLines(t, filepath.Join(dir, "log"))
	gate := filepath.Join(dir, "gate") // the hook reads a line to go on
	if err := unix.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	gatef, err := os.OpenFile(gate, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer gatef.Close()
	release := func() {
		if _, err := gatef.WriteString("go\n"); err != nil {
			t.Fatal(err)
		}
	}
	hookCmd := fmt.Sprintf(`SECRET=hunter2; echo "start $TENURE_KEY|$TENURE_LEADER|$TENURE_TERM|$TENURE_VALUE" > %[1]s; `+
		`read x < %[2]s; echo "end $TENURE_TERM" > %[1]s; [ -n "$TENURE_LEADER" ] || exit 3`,
		log.f.Name(), gate)
	w := startHookWatch(t, store, "hk", hookCmd)
	w.expect(t, "")
	if got := log.next(t, "first hook run"); got != "start hk||0|" {
		t.Fatalf("first run: %q, want %q", got, "start hk||0|")
	}
	// The hook blocks; the watch must still print each change at once.
	a := holdKey(t, store, "hk", "--id", "a", "--advertise", "va")
	w.expect(t, "a")
	stopHolder(t, a)
	w.expect(t, "")
	b := holdKey(t, store, "hk", "--id", "b", "--advertise", "vb")
	jb := w.expect(t, "b")
	// Three changes went by during the first run: only the newest runs next.
	release()
	if got := log.next(t, "end of the first run"); got != "end 0" {
		t.Fatalf("got %q, want the end of the first run", got)
	}
	want := fmt.Sprintf("start hk|b|%d|vb", jb.Term)
	if got := log.next(t, "the coalesced run"); got != want {
		t.Fatalf("after coalescing: %q, want %q (the newest state only)", got, want)
	}
	stopHolder(t, b)
	w.expect(t, "")
	release()
	log.next(t, "end of b's run")
	if want, got := fmt.Sprintf("start hk||%d|", jb.Term), log.next(t, "the run for no leader"); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	release() // this run exits 3
	log.next(t, "end of the failing run")
	holdKey(t, store, "hk", "--id", "c")
	jc := w.expect(t, "c")
	if want, got := fmt.Sprintf("start hk|c|%d|", jc.Term), log.next(t, "the run after a failure"); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	release()
	log.next(t, "end of c's run")
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("tenure watch: %v", err)
	}
	stderr, _ := os.ReadFile(w.stderr)
	if !strings.Contains(string(stderr), "--exec hook failed") || !strings.Contains(string(stderr), "exit status 3") {
		t.Errorf("the failing run was not logged with its status; stderr:\n%s", stderr)
	}
	if strings.Contains(string(stderr), "hunter2") {
		t.Errorf("the log quotes the hook's command line:\n%s", stderr)
	}
	select {
	case s := <-log.lines:
		t.Errorf("an extra hook run: %q", s)
	default:
	}
}

// TestWatchExecStopsTheRunningHook: stopping tenure watch stops a hook
// that is still running (its process group gets SIGTERM), and the watch
// exits 0.
func TestWatchExecStopsTheRunningHook(t *testing.T) {
	dir := t.TempDir()
	log := newFIFOLines(t, filepath.Join(dir, "log"))
	w := startHookWatch(t, "file://"+filepath.Join(dir, "store"), "hk",
		fmt.Sprintf(`trap 'echo term > %[1]s; exit 0' TERM; echo started > %[1]s; while :; do sleep 0.05; done`, log.f.Name()))
	w.expect(t, "")
	log.next(t, "the hook's start")
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	if got := log.next(t, "the hook's SIGTERM"); got != "term" {
		t.Fatalf("got %q, want the hook to see SIGTERM", got)
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("tenure watch: %v", err)
	}
}

// TestWatchExecTimeout: a run that outlives --exec-timeout is stopped
// (SIGTERM to its process group) and logged, and the state that changed
// meanwhile runs next. Without the timeout, the hung run held back every
// later state for as long as the watch ran.
func TestWatchExecTimeout(t *testing.T) {
	dir := t.TempDir()
	store := "file://" + filepath.Join(dir, "store")
	log := newFIFOLines(t, filepath.Join(dir, "log"))
	// The run for "nobody leads" hangs, ignoring nothing; the others return.
	hookCmd := fmt.Sprintf(`echo "start $TENURE_LEADER" > %[1]s; [ -n "$TENURE_LEADER" ] && exit 0; `+
		`trap 'echo term > %[1]s; exit 1' TERM; while :; do sleep 0.05; done`, log.f.Name())
	w := startHookWatch(t, store, "hk", hookCmd, "--exec-timeout", "1s")
	w.expect(t, "")
	if got := log.next(t, "the first run"); got != "start " {
		t.Fatalf("first run: %q, want %q", got, "start ")
	}
	holdKey(t, store, "hk", "--id", "a")
	w.expect(t, "a")
	if got := log.next(t, "the hung run's SIGTERM"); got != "term" {
		t.Fatalf("got %q, want the hung run to get SIGTERM", got)
	}
	if got := log.next(t, "the run for a"); got != "start a" {
		t.Fatalf("got %q, want the run for the newer state", got)
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("tenure watch: %v", err)
	}
	if stderr, _ := os.ReadFile(w.stderr); !strings.Contains(string(stderr), "--exec hook timed out") {
		t.Errorf("the timeout was not logged; stderr:\n%s", stderr)
	}
}

// TestWatchExecHookDiesWithTenure: a running hook's shell is killed with
// a SIGKILLed tenure watch (Pdeathsig), so a stale run cannot go on past
// the watch, alongside the runs of the watch that replaces it. Before,
// the shell ran on to the end of its script.
func TestWatchExecHookDiesWithTenure(t *testing.T) {
	dir := t.TempDir()
	log := newFIFOLines(t, filepath.Join(dir, "log"))
	w := startHookWatch(t, "file://"+filepath.Join(dir, "store"), "hk",
		fmt.Sprintf(`echo $$ > %[1]s; while :; do sleep 0.05; done`, log.f.Name()))
	w.expect(t, "")
	pid, err := strconv.Atoi(log.next(t, "the hook's pid"))
	if err != nil {
		t.Fatal(err)
	}
	// The hook's shell is its process group's leader: clear the group up
	// whatever happens.
	t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL) })
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	_ = w.cmd.Process.Kill()
	_ = w.cmd.Wait()
	// A pidfd turns readable when its process exits.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(wait/time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("the hook's shell (pid %d) still runs %s after tenure watch was killed", pid, wait)
	}
}

// TestHookSkipsForgedRecords: a record no tenure writes (written into the
// store from outside: a line break or a NUL in the holder, a control
// character in the value) does not reach the hook's environment; the
// hook is not run for it, a warning says why, and the next good record
// runs it.
func TestHookSkipsForgedRecords(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	logs := new(syncbuf.Buffer)
	ctx, cancel := context.WithCancel(context.Background())
	h := newHook(ctx, `printf '%s|%s\n' "$TENURE_LEADER" "$TENURE_VALUE" >> `+out, "hk", 0, io.Discard,
		slog.New(slog.NewTextHandler(logs, nil)))
	defer func() { cancel(); h.wait() }()
	for i, forged := range []tenure.Record{
		{Key: "hk", Holder: "a\nb", Term: 7},
		{Key: "hk", Holder: "a\x00", Term: 8},
		{Key: "hk", Holder: "a", Term: 9, Value: "10.0.0.1\r\nevil"},
		{Key: "hk", Holder: strings.Repeat("a", tenure.MaxIdentityLen+1), Term: 10},
	} {
		h.notify(forged)
		waitFor(t, func() bool { return strings.Count(logs.String(), "hook not run") == i+1 })
	}
	h.notify(tenure.Record{Key: "hk", Holder: "c", Term: 11, Value: "10.0.0.3:80"})
	waitFor(t, func() bool { b, _ := os.ReadFile(out); return len(b) > 0 })
	if b, _ := os.ReadFile(out); string(b) != "c|10.0.0.3:80\n" {
		t.Errorf("the hook ran with %q; want only the good record", b)
	}
	for _, want := range []string{`term=7`, `contains control character U+000A`, `term=9`, `value \"10.0.0.1\\r\\nevil\"`, `is 257 bytes`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the warnings do not say %s:\n%s", want, logs.String())
		}
	}
}
