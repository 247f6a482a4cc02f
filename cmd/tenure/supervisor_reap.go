package main

import (
	"os"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is the subreaper of CMD's descendants (Linux's
// PR_SET_CHILD_SUBREAPER): a process CMD starts and leaves (a daemon that
// forks, calls setsid and lets its parent exit) is orphaned to the
// supervisor, not to init, so it stays within reach when CMD's process
// group no longer holds it. The supervisor reaps every child itself (see
// reapChildren), passes the signals CMD's group gets on to the
// descendants outside it (see signalEscaped), and kills them all before it
// reports CMD's exit (see killDescendants), so nothing CMD started runs on
// once tenure may release the lease.

// becomeSubreaper makes this process the reaper of its orphaned
// descendants.
func becomeSubreaper() error {
	return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
}

// children is what reapChildren reports.
type children struct {
	cmdDone chan struct{} // closed once CMD was reaped
	code    int           // CMD's exit code, once cmdDone is closed
	gone    chan struct{} // closed once this process has no child left
}

// reapChildren waits for every child of this process, CMD (pid cmdPid)
// and the orphans left to this subreaper alike, until none is left.
// Nothing else may wait for children: a wait for CMD alone would leave the
// orphans as zombies. When CMD was the last child, gone is closed before
// cmdDone, so that a caller finds at once that nothing is left to kill.
func reapChildren(cmdPid int) *children {
	c := &children{cmdDone: make(chan struct{}), code: exitRuntime, gone: make(chan struct{})}
	go c.reap(cmdPid)
	return c
}

// reap is reapChildren's goroutine: it reaps whatever exits until CMD
// did, then, once it has seen whether any child is left (closing gone
// first if none is), closes cmdDone, and goes on reaping until no child
// is left.
func (c *children) reap(cmdPid int) {
	var ws syscall.WaitStatus
	for {
		pid, more := reapOne(0, &ws)
		if pid == cmdPid {
			c.code = waitCode(ws)
		}
		if pid == cmdPid || !more {
			break
		}
	}
	for {
		pid, more := reapOne(syscall.WNOHANG, &ws)
		if !more {
			close(c.gone)
			close(c.cmdDone)
			return
		}
		if pid == 0 {
			break // children left, none of them exited yet
		}
	}
	close(c.cmdDone)
	for {
		if _, more := reapOne(0, &ws); !more {
			close(c.gone)
			return
		}
	}
}

// reapOne reaps one exited child, waiting for one unless flags has
// WNOHANG; pid is 0 if none had exited. more is false once this process
// has no child at all.
func reapOne(flags int, ws *syscall.WaitStatus) (pid int, more bool) {
	for {
		pid, err := syscall.Wait4(-1, ws, flags, nil)
		if err != syscall.EINTR {
			return pid, err == nil
		}
	}
}

// waitCode is an exit code in shell terms: 128+n if killed by signal n.
func waitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// descendantsLimit bounds how long killDescendants goes on killing: a
// process that forks faster than /proc can be read could otherwise hold
// the supervisor, and so the lease, for good.
const descendantsLimit = 5 * time.Second

// killDescendants SIGKILLs every descendant of this process, again as
// killed ones' children are orphaned to it, until it has no child left or
// descendantsLimit passed. It returns at once when c.gone is closed.
func (c *children) killDescendants() {
	pollUntil(descendantsLimit, c.gone, func() bool {
		for pid := range descendantsOf(os.Getpid()) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return false // done when c.gone is closed
	})
}

// pollUntil calls try until it returns true, again and again with a pause
// that grows from 100 µs to 10 ms in between, as nothing signals what it
// waits for; it gives up after limit, and returns at once when stop (nil:
// never) is closed. It reports whether try returned true or stop was
// closed.
func pollUntil(limit time.Duration, stop <-chan struct{}, try func() bool) bool {
	giveUp := time.NewTimer(limit)
	defer giveUp.Stop()
	for d := 100 * time.Microsecond; ; d = min(2*d, 10*time.Millisecond) {
		select {
		case <-stop:
			return true
		default:
		}
		if try() {
			return true
		}
		poll := time.NewTimer(d)
		select {
		case <-stop:
			poll.Stop()
			return true
		case <-giveUp.C:
			poll.Stop()
			return false
		case <-poll.C:
		}
	}
}

// signalEscaped sends sig to every descendant of this process outside
// process group pg: pg itself gets its signals from tenure or the
// deadline, and these processes would miss them. It reads all of /proc
// (milliseconds), so the supervisor runs it beside its loop.
func signalEscaped(pg int, sig syscall.Signal) {
	for pid, pgrp := range descendantsOf(os.Getpid()) {
		if pgrp != pg {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// descendantsOf returns the process group of each descendant of process
// root, by pid, from one reading of /proc (none if it cannot be read).
func descendantsOf(root int) map[int]int { return readProcs().descendants(root) }

// procs is one reading of /proc: each process's pid and process group, by
// parent.
type procs map[int][]struct{ pid, pgrp int }

// readProcs reads /proc once. It yields the processor after each process
// read: the supervisor runs on one, and its reaper must see CMD's exit at
// once.
func readProcs() procs {
	kids := procs{}
	eachProc(func(pid int, f []string) bool {
		runtime.Gosched()
		if len(f) >= 3 {
			ppid, _ := strconv.Atoi(f[1])
			pgrp, _ := strconv.Atoi(f[2])
			kids[ppid] = append(kids[ppid], struct{ pid, pgrp int }{pid, pgrp})
		}
		return true
	})
	return kids
}

// descendants returns the process group of each descendant of process
// root, by pid.
func (kids procs) descendants(root int) map[int]int {
	found := map[int]int{}
	for next := []int{root}; len(next) > 0; {
		parent := next[len(next)-1]
		next = next[:len(next)-1]
		for _, k := range kids[parent] {
			if _, seen := found[k.pid]; !seen {
				found[k.pid] = k.pgrp
				next = append(next, k.pid)
			}
		}
	}
	return found
}
