package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// superviseCmdName is the hidden subcommand `tenure run` re-executes itself
// as, to own its command's process group.
const superviseCmdName = "__supervise"

// Exit codes of the supervisor when it could not run the command at all.
const (
	exitNoDeadline = 125 // tenure went away before sending the first deadline
	exitCannotExec = 126 // the command could not be started
)

// superviseCmd is `tenure __supervise --lease-fds N -- CMD [ARGS...]`,
// started by `tenure run` as the leader of a new process group, with fd 3
// the read end of the control pipe and fds 4..4+N-1 the lease files. It
// keeps the lease files open (without passing them to CMD), runs CMD in its
// process group, and enforces the deadlines read from the control pipe by
// itself, so that CMD cannot outlive the lease even if tenure is frozen or
// killed:
//
//   - at a deadline's termAt it sends SIGTERM to the group, at killAt SIGKILL;
//   - on end of file on the pipe (tenure died) it kills the group at once;
//   - SIGTERM, SIGINT and SIGHUP are caught and ignored: tenure signals the
//     whole group, CMD included, and the supervisor must outlive CMD;
//   - when CMD exits, it kills whatever is left of the group and exits with
//     CMD's exit code (128+n when CMD was killed by signal n).
//
// It reads the first deadline before starting CMD, so CMD never runs
// unsupervised.
func superviseCmd(args []string, stderr io.Writer) int {
	fs := newFlagSet(superviseCmdName)
	nfds := fs.Int("lease-fds", 0, "number of lease files after the control pipe")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 || *nfds < 0 {
		return fail(stderr, usageErrorf("%s is internal to tenure run", superviseCmdName))
	}
	// Nothing of ours may leak into CMD.
	for fd := 3; fd < 4+*nfds; fd++ {
		syscall.CloseOnExec(fd)
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	ctl := os.NewFile(3, "tenure-control")
	first, err := readDeadline(ctl)
	if err != nil {
		return exitNoDeadline
	}
	msgs, eof := make(chan deadlineMsg), make(chan struct{})
	go func() {
		defer close(eof)
		for {
			m, err := readDeadline(ctl)
			if err != nil {
				return
			}
			msgs <- m
		}
	}()

	argv := fs.Args()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "tenure: cannot start %s: %v\n", argv[0], err)
		return exitCannotExec
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()

	pg := syscall.Getpgrp()
	termT, killT := time.NewTimer(monoUntil(first.termAt)), time.NewTimer(monoUntil(first.killAt))
	termAt, killAt := first.termAt, first.killAt
	for {
		select {
		case m := <-msgs:
			if m.termAt > termAt {
				termAt = m.termAt
				termT.Reset(monoUntil(termAt))
			}
			if m.killAt > killAt {
				killAt = m.killAt
				killT.Reset(monoUntil(killAt))
			}
		case <-termT.C:
			_ = syscall.Kill(-pg, syscall.SIGTERM)
		case <-killT.C:
			return killGroup(cmd, done, pg)
		case <-eof:
			return killGroup(cmd, done, pg)
		case <-sigs:
			// tenure signals the whole group: CMD has it already.
		case <-done:
			code := exitCode(cmd.ProcessState)
			leaveAndKill(pg)
			return code
		}
	}
}

// killGroup kills CMD, waits until it is dead, then kills the rest of the
// group. CMD goes first so that it is gone before the lease files this
// process holds are closed by its own death.
func killGroup(cmd *exec.Cmd, done <-chan struct{}, pg int) int {
	_ = cmd.Process.Kill()
	<-done
	code := exitCode(cmd.ProcessState)
	leaveAndKill(pg)
	return code
}

// leaveAndKill SIGKILLs what is left of process group pg (CMD's children)
// while this process survives to report CMD's exit code: it first moves
// itself into its parent's process group (same session, so allowed). If
// that fails (the parent is gone), it kills the group, itself included:
// nobody is waiting for the code then.
func leaveAndKill(pg int) {
	if ppg, err := syscall.Getpgid(os.Getppid()); err == nil && ppg != pg {
		if syscall.Setpgid(0, ppg) == nil {
			_ = syscall.Kill(-pg, syscall.SIGKILL)
			return
		}
	}
	_ = syscall.Kill(-pg, syscall.SIGKILL)
}

// exitCode is a process's exit code in shell terms: 128+n if killed by
// signal n.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return exitRuntime
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
