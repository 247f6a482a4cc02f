package main

import (
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// tenure run and tenure shard are subreapers too. The supervisor adopts
// what CMD leaves outside its process group (see supervisor_reap.go), but
// it leads that group, so a SIGKILL of the group kills it with CMD: `kill
// -9 0` in a CMD script, an operator's `kill -9 -PGID`, or tenure's own
// SIGKILL of a supervisor that did not exit in time (see killGroup). What
// CMD started outside its group is then orphaned to tenure, not to init,
// and tenure kills it (see orphanage.killOrphans) before the elector may
// release the lease.

// orphanage is this process's record of the children it started itself
// (supervisors), so that it can tell the orphans it adopted from them.
type orphanage struct {
	mu   sync.Mutex
	on   bool              // this process is a subreaper
	err  error             // why it could not become one (see warnNotSubreaper)
	sups map[int]*exec.Cmd // started supervisors not yet reaped, by pid
}

// adopted is this process's orphanage.
var adopted = &orphanage{sups: map[int]*exec.Cmd{}}

// adoptFor makes this process a subreaper if command is one that runs
// supervisors. main calls it before anything starts; tests that run
// `tenure run` in their own process do not, so the test binary adopts
// nothing of other tests'. A failure is kept for warnNotSubreaper: the
// command's logger, which --log-format and --quiet shape, does not exist
// yet.
func adoptFor(command string) {
	if command != "run" && command != "shard" {
		return
	}
	err := becomeSubreaper()
	adopted.mu.Lock()
	adopted.on, adopted.err = err == nil, err
	adopted.mu.Unlock()
	if err == nil {
		go adopted.reapOnSIGCHLD()
	}
}

// warnNotSubreaper logs, once the command's logger exists, that this
// process could not become a subreaper, if adoptFor failed.
func (o *orphanage) warnNotSubreaper(logger *slog.Logger) {
	o.mu.Lock()
	err := o.err
	o.mu.Unlock()
	if err != nil {
		logger.Warn("tenure: cannot become a subreaper: what CMD starts outside its process group escapes if its supervisor is killed", "err", err)
	}
}

// reapDelay is how long reapOnSIGCHLD waits after a SIGCHLD before it
// reads /proc: a supervisor's exit sends one at every handoff, which the
// read must not slow down, and a burst of exits is read once.
const reapDelay = time.Second

// reapOnSIGCHLD reaps the orphans this process adopted that exited by
// themselves, reapDelay after each SIGCHLD, for as long as the process
// runs: as a container's PID 1, tenure adopts every orphan of the
// container (a `kubectl exec` session's leftovers), and as a subreaper, a
// descendant of CMD's its supervisor could not kill; without it they
// would stay its zombies. It kills nothing.
func (o *orphanage) reapOnSIGCHLD() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGCHLD)
	for range sig {
		time.Sleep(reapDelay)
		o.sweep(0, false)
	}
}

// start starts cmd, a supervisor, and records it, with the lock held so
// that a sweep never takes it for an orphan. It returns the process's
// start time in clock ticks since boot (0 if unknown).
func (o *orphanage) start(cmd *exec.Cmd) (started uint64, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	o.sups[cmd.Process.Pid] = cmd
	if f, ok := procStat(cmd.Process.Pid); ok {
		started = startTime(f)
	}
	return started, nil
}

// reaped forgets cmd, a supervisor started by start, once its Wait has
// returned.
func (o *orphanage) reaped(cmd *exec.Cmd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.sups[cmd.Process.Pid] == cmd {
		delete(o.sups, cmd.Process.Pid)
	}
}

// killOrphans SIGKILLs and reaps every orphan this process adopted that
// started at or after since (clock ticks since boot: the start of the
// supervisor whose death orphaned them, as everything CMD started came
// after it), again as killed ones' children are orphaned to it, until none
// is left or descendantsLimit passed; it returns how many were left. It
// does nothing unless this process is a subreaper.
//
// An orphan is a child that is neither a supervisor this process started
// nor in its own process group, where the children a store's SDK starts
// (a kubeconfig's credential plugin) run, and which CMD's descendants do
// not join unless they mean to.
func (o *orphanage) killOrphans(since uint64) (left int) {
	o.mu.Lock()
	on := o.on
	o.mu.Unlock()
	if !on {
		return 0
	}
	pollUntil(descendantsLimit, nil, func() bool {
		left = o.sweep(since, true)
		return left == 0
	})
	return left
}

// sweep reaps the orphans started at or after since that exited and, if
// kill is set, SIGKILLs the others, from one reading of /proc; it returns
// how many it found not yet reaped. Each one is this process's child until
// it reaps it, so its pid cannot be reused in between.
func (o *orphanage) sweep(since uint64, kill bool) (found int) {
	self, own := strconv.Itoa(os.Getpid()), syscall.Getpgrp()
	o.mu.Lock()
	defer o.mu.Unlock()
	eachProc(func(pid int, f []string) bool {
		if len(f) < 20 || f[1] != self || o.sups[pid] != nil || startTime(f) < since {
			return true
		}
		if pgrp, err := strconv.Atoi(f[2]); err != nil || pgrp == own {
			return true
		}
		if f[0] == "Z" {
			var ws syscall.WaitStatus
			if wpid, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); wpid == pid {
				return true
			}
		}
		if kill {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		found++
		return true
	})
	return found
}

// startTime is the start time, in clock ticks since boot, in the fields of
// /proc/PID/stat after the command name (procStat); 0 if absent.
func startTime(f []string) uint64 {
	if len(f) < 20 {
		return 0
	}
	t, _ := strconv.ParseUint(f[19], 10, 64)
	return t
}
