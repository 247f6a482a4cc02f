package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

// escaper is a CMD that starts a process outside its process group, the
// way a daemon does (setsid in a child whose parent then exits, so that
// the process is an orphan in a session of its own, its standard files
// closed), writes that
// process's pid to pidFile and, if it is sent SIGTERM, the word "term" to
// termFile. Then CMD runs rest.
func escaper(pidFile, termFile, rest string) []string {
	daemon := `trap 'echo term > ` + termFile + `; exit 0' TERM; echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; while :; do sleep 0.05; done`
	return []string{"sh", "-c", `(setsid sh -c "$1" </dev/null >/dev/null 2>&1 &) ; ` + rest, "sh", daemon}
}

// startEscaper starts `tenure run` on a fresh local store with flags and
// an escaper CMD running rest, waits for the escaped daemon's pid, and
// kills the daemon at the end of the test whatever happened. It returns
// tenure, its done channel, the daemon's pid and the daemon's term file.
func startEscaper(t *testing.T, rest string, flags ...string) (cmd *exec.Cmd, done chan struct{}, pid int, termFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile, termFile := filepath.Join(dir, "daemon.pid"), filepath.Join(dir, "term")
	args := append([]string{"run", "--store", "file://" + dir + "/state", "--key", "job", "--quiet"}, flags...)
	args = append(append(args, "--"), escaper(pidFile, termFile, strings.ReplaceAll(rest, "TERMFILE", termFile))...)
	cmd, done = startTenure(t, nil, nil, args...)
	pid = readPID(t, pidFile, done)
	killAtEnd(t, pid)
	return cmd, done, pid, termFile
}

// killAtEnd SIGKILLs process pid at the end of the test, if it still
// runs: through a pidfd opened now, so that a pid reused by then is not
// hit.
func killAtEnd(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return // already gone
	}
	t.Cleanup(func() {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		_ = unix.Close(fd)
	})
}

// TestRunKillsEscapedDescendants: a process CMD started outside its
// process group, and orphaned, is killed when CMD exits, before tenure
// exits (and so before the lease is released).
func TestRunKillsEscapedDescendants(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "daemon.pid")
	args := append([]string{"run", "--store", "file://" + dir + "/state", "--key", "job", "--quiet", "--"},
		escaper(pidFile, filepath.Join(dir, "term"), `while [ ! -s `+pidFile+` ]; do sleep 0.01; done; exit 3`)...)
	r := runTenure(t, args...)
	if r.code != 3 {
		t.Fatalf("exit code %d, want CMD's 3; stderr %s", r.code, r.stderr)
	}
	pid := readPID(t, pidFile, nil)
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the process CMD started in a session of its own (pid %d) outlived tenure run: kill(pid, 0) = %v", pid, err)
	}
}

// TestRunStopsEscapedDescendantsOnSignal: SIGTERM to tenure reaches a
// process CMD started outside its process group too (CMD waits for it to
// stop), and tenure exits only after it is gone.
func TestRunStopsEscapedDescendantsOnSignal(t *testing.T) {
	// CMD waits, on SIGTERM, until what it started has it too.
	cmd, done, pid, termFile := startEscaper(t, `trap 'while [ ! -s TERMFILE ]; do sleep 0.01; done; exit 0' TERM; while :; do sleep 0.05; done`)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, wait, "tenure run after SIGTERM")
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the process CMD started in a session of its own (pid %d) outlived tenure run's SIGTERM: kill(pid, 0) = %v", pid, err)
	}
	if data, err := os.ReadFile(termFile); err != nil || string(data) != "term\n" {
		t.Errorf("the escaped process was not sent SIGTERM first: %q, %v", data, err)
	}
}

// TestRunKilledTenureTakesEscapedDescendants: when tenure itself is
// SIGKILLed, its supervisor kills a process CMD started outside its
// process group too: nothing CMD started lives on as a second leader.
func TestRunKilledTenureTakesEscapedDescendants(t *testing.T) {
	cmd, done, pid, _ := startEscaper(t, `while :; do sleep 0.05; done`)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, wait, "tenure run after SIGKILL")
	waitExit(t, pid, wait, "the process CMD started in a session of its own")
}

// TestRunFrozenTenureEscapedDescendantsDie: with tenure frozen, the
// supervisor stops what CMD started outside its process group by the
// deadline too, as it stops CMD.
func TestRunFrozenTenureEscapedDescendantsDie(t *testing.T) {
	cmd, done, pid, _ := startEscaper(t, `while :; do sleep 0.05; done`, "--ttl", "1500ms")
	freezeUntilGone(t, cmd, done, pid, "the process a frozen tenure's CMD started in a session of its own")
}

// TestRunReapsOrphans: the orphans CMD leaves to the supervisor while it
// runs are reaped as they exit, not kept as zombies until CMD ends.
func TestRunReapsOrphans(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "cmd.pid")
	// Ten orphans that each write a file and exit; CMD waits for the files.
	cmd, done := startTenure(t, nil, nil, "run", "--store", "file://"+dir+"/state", "--key", "job", "--quiet", "--",
		"sh", "-c", `for i in 0 1 2 3 4 5 6 7 8 9; do (setsid sh -c "echo > `+dir+`/o$i" &); done; `+
			`while [ $(ls `+dir+` | grep -c '^o') -lt 10 ]; do sleep 0.01; done; `+
			`echo $$ > `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`; while :; do sleep 0.05; done`)
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		waitDone(t, done, wait, "tenure run after SIGTERM")
	}()
	pid := readPID(t, pidFile, done)
	f, ok := procStat(pid)
	if !ok || len(f) < 2 {
		t.Fatalf("cannot read /proc/%d/stat", pid)
	}
	sup, _ := strconv.Atoi(f[1])
	// Nothing signals the reaping: poll until CMD is the supervisor's only
	// child, the orphans gone and reaped.
	deadline := time.Now().Add(wait)
	for {
		kids := childrenOf(t, sup)
		if len(kids) == 1 && kids[0] == pid {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor (pid %d) has children %v while CMD (pid %d) runs; want CMD alone, the orphans reaped", sup, kids, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunLostLeadershipStubbornEscapedDescendants: when leadership is lost
// while tenure is alive and CMD ignores SIGTERM, tenure's SIGKILL after
// --grace must not kill the supervisor before it killed what CMD started
// outside its process group (which ignores SIGTERM too): nothing CMD
// started may outlive tenure's return, after which the lease is released.
func TestRunLostLeadershipStubbornEscapedDescendants(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "daemon.pid")
	daemon := `echo $$ > ` + pidFile + `.tmp; mv ` + pidFile + `.tmp ` + pidFile + `; while :; do sleep 0.05; done`
	stderr := runLosingLeadership(t, pidFile, `trap "" TERM; (setsid sh -c "$1" </dev/null >/dev/null 2>&1 &); while :; do sleep 0.05; done`, "sh", daemon)
	pid := readPID(t, pidFile, nil)
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the process CMD started in a session of its own (pid %d), ignoring SIGTERM, outlived tenure run's loss of leadership; stderr:\n%s", pid, stderr)
	}
}

// countSigtermName makes the test binary countSigterm (see TestMain).
const countSigtermName = "__count-sigterm"

// countSigterm is a daemon for the tests: it leaves its process group
// (setsid), writes its pid to dir/pid, then appends a line to dir/terms
// for every SIGTERM it gets, until it is killed.
func countSigterm(dir string) {
	_, _ = syscall.Setsid()
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGTERM)
	pid := filepath.Join(dir, "pid")
	_ = os.WriteFile(pid+".tmp", []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644)
	_ = os.Rename(pid+".tmp", pid)
	for range sigs {
		f, err := os.OpenFile(filepath.Join(dir, "terms"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			_, _ = f.WriteString("term\n")
			_ = f.Close()
		}
	}
	os.Exit(0)
}

// TestRunFrozenTenureEscapedDescendantsGetOneSigterm: at the deadline's
// SIGTERM, what CMD started outside its process group gets SIGTERM once,
// as the group does: many programs take a second SIGTERM as an order to
// quit at once, without the graceful stop the first one began.
func TestRunFrozenTenureEscapedDescendantsGetOneSigterm(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd, done := startTenure(t, nil, nil, "run", "--store", "file://"+dir+"/state", "--key", "job", "--quiet", "--ttl", "1500ms", "--",
		"sh", "-c", `"$1" `+countSigtermName+` "$2" </dev/null >/dev/null 2>&1 & trap "" TERM; while :; do sleep 0.05; done`, "sh", self, dir)
	pid := readPID(t, filepath.Join(dir, "pid"), done)
	killAtEnd(t, pid)
	freezeUntilGone(t, cmd, done, pid, "the daemon a frozen tenure's CMD started in a session of its own")
	data, err := os.ReadFile(filepath.Join(dir, "terms"))
	if n := strings.Count(string(data), "term\n"); n != 1 {
		t.Fatalf("the daemon outside CMD's group got SIGTERM %d times at the deadline, want once (%v)", n, err)
	}
}

// TestRunLostLeadershipStoppedSupervisor: a supervisor that cannot do its
// part (CMD stopped it) does not hold tenure: after --grace tenure kills
// CMD itself, and the supervisor too once it failed to exit in time.
func TestRunLostLeadershipStoppedSupervisor(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "cmd.pid")
	start := time.Now()
	stderr := runLosingLeadership(t, pidFile, `trap "" TERM; kill -STOP $PPID; echo $$ > `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`; while :; do sleep 0.05; done`)
	pid := readPID(t, pidFile, nil)
	if alive(pid) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("CMD (pid %d) outlived tenure run's loss of leadership; stderr:\n%s", pid, stderr)
	}
	if d := time.Since(start); d > 3*time.Second+descendantsLimit+3*time.Second {
		t.Errorf("tenure run took %s to give up on a stopped supervisor", d)
	}
}

// stallStore answers every Renew with a failure that is not a loss, as a
// store that cannot be reached does, once the file after exists (CMD's
// daemon wrote it): the elector's leadership ends at its renew deadline.
type stallStore struct {
	tenure.Store
	after string
}

func (s *stallStore) Renew(ctx context.Context, l tenure.Lease) error {
	if _, err := os.Stat(s.after); err != nil {
		return s.Store.Renew(ctx, l)
	}
	return errors.New("injected by the test: the store cannot be reached")
}

// TestRunRenewDeadlineSigtermOnce: when renewals fail until the renew
// deadline, tenure leaves the group's SIGTERM to the supervisor, which
// sends it at that same deadline: what CMD started outside its group
// (which gets each SIGTERM the supervisor gets) is sent one, not two.
// Two close together may merge in the kernel: the old code failed 3 of 6
// runs.
func TestRunRenewDeadlineSigtermOnce(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	store := &stallStore{after: filepath.Join(dir, "pid")}
	injectStore(t, &store.Store, store)

	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"run", "--store", "memory://stall-" + t.Name(), "--key", "job", "--ttl", "3s", "--grace", "300ms", "--",
		"sh", "-c", `"$1" ` + countSigtermName + ` "$2" </dev/null >/dev/null 2>&1 & trap "" TERM; while :; do sleep 0.05; done`, "sh", self, dir}, &stdout, &stderr)
	if code != exitRuntime {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitRuntime, stderr.String())
	}
	if !strings.Contains(stderr.String(), "renew deadline") {
		t.Fatalf("leadership did not end at the renew deadline; stderr:\n%s", stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "terms"))
	if n := strings.Count(string(data), "term\n"); n != 1 {
		t.Fatalf("the daemon outside CMD's group got SIGTERM %d times at the renew deadline, want once (%v); stderr:\n%s", n, err, stderr.String())
	}
}

// startNextCandidate starts a second `tenure run` of key job on store: a
// candidate whose CMD, once it leads, exits 7 if process pid runs (exists
// and is not a zombie: one killed and not yet reaped runs no more). The
// returned check waits for it to exit and fails t if its CMD found pid
// running.
func startNextCandidate(t *testing.T, store string, pid int) (check func()) {
	t.Helper()
	var stderr bytes.Buffer
	running := fmt.Sprintf(`s=$(sed 's/.*) //' /proc/%d/stat 2>/dev/null | cut -c1); if [ -n "$s" ] && [ "$s" != Z ]; then exit 7; fi`, pid)
	next, done := startTenure(t, nil, &stderr, "run", "--store", store, "--key", "job", "--quiet", "--", "sh", "-c", running)
	return func() {
		t.Helper()
		waitDone(t, done, wait, "the next leader's tenure run")
		switch code := exitCode(next.ProcessState); code {
		case 0:
		case 7:
			t.Fatalf("the next leader's CMD found the process the last one started in a session of its own (pid %d) running", pid)
		default:
			t.Fatalf("the next leader exited %d; stderr:\n%s", code, stderr.String())
		}
	}
}

// TestRunGroupKillTakesEscapedDescendants: `kill -9 0` in CMD kills its
// whole process group, the supervisor that leads it included; what CMD
// started outside the group is then orphaned to tenure, which kills it
// before it releases the lease: the next leader's CMD (waiting as a
// candidate all along) never finds it running.
func TestRunGroupKillTakesEscapedDescendants(t *testing.T) {
	dir := t.TempDir()
	pidFile, goFile := filepath.Join(dir, "daemon.pid"), filepath.Join(dir, "go")
	store := "file://" + dir + "/state"
	args := append([]string{"run", "--store", store, "--key", "job", "--quiet", "--"},
		escaper(pidFile, filepath.Join(dir, "term"), `while [ ! -e `+goFile+` ]; do sleep 0.01; done; kill -9 0`)...)
	first, firstDone := startTenure(t, nil, nil, args...)
	pid := readPID(t, pidFile, firstDone)
	killAtEnd(t, pid)

	checkNext := startNextCandidate(t, store, pid)
	if err := os.WriteFile(goFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitDone(t, firstDone, wait, "tenure run after its CMD's kill -9 0")
	if code := exitCode(first.ProcessState); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit code %d, want %d (CMD killed by SIGKILL)", code, 128+int(syscall.SIGKILL))
	}
	checkNext()
	if err := syscall.Kill(pid, 0); err != syscall.ESRCH {
		t.Fatalf("the process CMD started in a session of its own (pid %d) outlived its group's kill -9 0: kill(pid, 0) = %v", pid, err)
	}
}

// TestRunStoppedSupervisorEscapedDescendantsDie: CMD ignores SIGTERM and
// stops its supervisor, then its leader is asked to step down: after
// --grace tenure kills CMD's group, and what CMD started outside it, which
// the stopped supervisor cannot kill, dies before the lease can go to the
// next candidate, whose CMD finds it gone. With a 3 s TTL, waiting for the
// supervisor to be killed first would let the lease lapse meanwhile; the
// stopped supervisor is killed at once, so the task ends within its stop
// timeout (the elector logs no overrun).
func TestRunStoppedSupervisorEscapedDescendantsDie(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "daemon.pid")
	store := "file://" + dir + "/state"
	// Only the first term stops its supervisor: the stepped-down leader
	// campaigns again, and its later CMDs exit at once.
	args := append([]string{"run", "--store", store, "--key", "job", "--ttl", "3s", "--grace", "100ms", "--"},
		escaper(pidFile, filepath.Join(dir, "term"), `[ "$TENURE_TERM" = 1 ] || exit 0; trap "" TERM; kill -STOP $PPID; while :; do sleep 0.05; done`)...)
	var stderr bytes.Buffer
	_, firstDone := startTenure(t, nil, &stderr, args...)
	pid := readPID(t, pidFile, firstDone)
	killAtEnd(t, pid)

	checkNext := startNextCandidate(t, store, pid)
	if r := runTenure(t, "step-down", "--store", store, "--key", "job"); r.code != 0 {
		t.Fatalf("tenure step-down exited %d; stderr:\n%s", r.code, r.stderr)
	}
	checkNext()
	waitDone(t, firstDone, wait, "the stepped-down tenure run")
	if strings.Contains(stderr.String(), "still running after its context was cancelled") {
		t.Fatalf("the stepped-down leader's task outlived its stop timeout; stderr:\n%s", stderr.String())
	}
}
