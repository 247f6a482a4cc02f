package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// waitExit waits, through a pidfd, until process pid has exited (or was
// already gone), failing t after d.
func waitExit(t testing.TB, pid int, d time.Duration, what string) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err == unix.ESRCH {
		return
	}
	if err != nil {
		t.Fatalf("pidfd_open(%d): %v", pid, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(d.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("%s (pid %d) still runs after %s", what, pid, d)
		}
		return
	}
}

// readPID waits for a pid file written by a test CMD.
func readPID(t testing.TB, path string, done <-chan struct{}) int {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(path)
		if s := strings.TrimSpace(string(data)); err == nil && strings.HasSuffix(string(data), "\n") {
			pid, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		select {
		case <-done:
			t.Fatal("tenure exited before its CMD wrote its pid")
		case <-time.After(5 * time.Millisecond):
		}
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// TestRunKillsLeftovers: when CMD exits, what it left running in its
// process group is killed, and tenure still exits with CMD's code.
func TestRunKillsLeftovers(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "bg.pid")
	r := runTenure(t, "run", "--store", "file://"+dir, "--key", "job", "--quiet", "--",
		"sh", "-c", `sleep 1000 & echo $! > `+pidFile+`; exit 3`)
	if r.code != 3 {
		t.Fatalf("exit code %d, want CMD's 3; stderr %s", r.code, r.stderr)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	waitExit(t, pid, wait, "CMD's background child")
}

// TestRunFrozenLeaderStubbornCMD: with tenure frozen and CMD ignoring
// SIGTERM, the supervisor SIGKILLs CMD's group by itself at the deadline.
func TestRunFrozenLeaderStubbornCMD(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "cmd.pid")
	cmd, done := startTenure(t, nil, nil, "run", "--store", "file://"+dir+"/state", "--key", "job", "--quiet", "--ttl", "1500ms", "--",
		"sh", "-c", `trap "" TERM; echo $$ > `+pidFile+`; while :; do sleep 0.05; done`)
	pid := readPID(t, pidFile, done)
	freezeUntilGone(t, cmd, done, pid, "the CMD of a frozen tenure")
	// Resumed, tenure finds its leadership gone and exits 1.
	if code := exitCode(cmd.ProcessState); code != exitRuntime {
		t.Fatalf("resumed tenure exited %d, want %d", code, exitRuntime)
	}
}

// freezeUntilGone stops tenure (SIGSTOP) until process pid, one its
// supervisor must end by the deadline on its own (what), has exited, then
// resumes tenure and waits for it to exit.
func freezeUntilGone(t *testing.T, cmd *exec.Cmd, done <-chan struct{}, pid int, what string) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitExit(t, pid, wait, what)
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, wait, "the resumed tenure")
}

// childrenOf returns the pids of pid's children, from /proc.
func childrenOf(t testing.TB, pid int) []int {
	t.Helper()
	var kids []int
	if !eachProc(func(child int, f []string) bool {
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			kids = append(kids, child)
		}
		return true
	}) {
		t.Fatal("cannot read /proc")
	}
	return kids
}

// TestRunStandbySupervisorEndsWithTenure: the supervisor a campaigning
// tenure keeps ready exits when tenure dies, however it dies.
func TestRunStandbySupervisorEndsWithTenure(t *testing.T) {
	c := testCluster(t, "job", []string{"--quiet"}, nil)
	if _, err := c.start("a"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.events.nextStart(0, wait); !ok {
		t.Fatal("no CMD started")
	}
	b, err := c.start("b")
	if err != nil {
		t.Fatal(err)
	}
	// b campaigns with its supervisor standing by; find it.
	var standby int
	for deadline := time.Now().Add(wait); standby == 0 && time.Now().Before(deadline); {
		for _, kid := range childrenOf(t, b.Cmd.Process.Pid) {
			if cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(kid) + "/cmdline"); strings.Contains(string(cmdline), superviseCmdName) {
				standby = kid
			}
		}
		if standby == 0 {
			time.Sleep(10 * time.Millisecond) // no event for a process appearing
		}
	}
	if standby == 0 {
		t.Fatal("the campaigning tenure has no standby supervisor")
	}
	if err := c.signal("b", syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitExit(t, standby, wait, "the standby supervisor of a killed tenure")
	if n := checkHistory(c.events.events()).Starts; n != 1 {
		t.Fatalf("%d CMDs started, want only a's", n)
	}
}
