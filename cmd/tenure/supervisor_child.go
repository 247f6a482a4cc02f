package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
)

// superviseCmdName is the hidden subcommand `tenure run` re-executes itself
// as, to own its command's process group.
const superviseCmdName = "__supervise"

// Exit codes of the supervisor when it did not run the command.
const (
	exitNotStarted = 125 // tenure went away (or stopped campaigning) first
	exitCannotExec = 126 // the command could not be started
)

// superviseCmd is `tenure __supervise [-log-format json] -- CMD [ARGS...]`,
// started by `tenure run` while it campaigns, as the leader of a new process group, with fd 3
// its end of the control channel (see controlMsgLen). It waits for the
// first message, which carries the term and the lease files, then runs CMD
// in its process group with TENURE_TERM set, keeps the lease files open
// (without passing them to CMD), and enforces the deadlines it receives by
// itself, so that CMD cannot outlive the lease even if tenure is frozen or
// killed:
//
//   - at a deadline's termAt it sends SIGTERM to the group, at killAt SIGKILL;
//   - on end of file on the channel (tenure died) it kills the group at once;
//   - SIGTERM, SIGINT and SIGHUP are caught, not obeyed: tenure signals the
//     whole group, CMD included, and the supervisor must outlive CMD; it
//     passes them on to CMD's descendants outside the group;
//   - it is the subreaper of CMD's descendants (see becomeSubreaper), and
//     what leaves the group gets the group's signals and deadlines;
//   - when CMD exits, it kills every descendant left, reports CMD's
//     exit code on the channel (so tenure need not wait for this process
//     to exit) and exits with that code (128+n when CMD was killed by
//     signal n).
//
// End of file before the first message ends it at once: CMD never runs
// without a deadline. Nor does it if the deadline timers (timerfds, see
// deadlineTimer) cannot be armed: the supervisor then exits
// exitCannotExec, saying why.
func superviseCmd(args []string, stderr io.Writer) int {
	// One P: the supervisor only waits (for messages, signals, its CMD and
	// the deadline), never computes, and with one P an idle wake-up has no
	// other P to look for work on, nor another thread to start.
	runtime.GOMAXPROCS(1)
	fs := newFlagSet(superviseCmdName)
	logFormat := fs.String("log-format", "text", "")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		return fail(stderr, usageErrorf("%s is internal to tenure run", superviseCmdName))
	}
	say := newSupervisorLog(stderr, *logFormat)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	uc, err := controlConn()
	if err != nil {
		fmt.Fprintf(stderr, "tenure: %s needs the control socket at fd 3\n", superviseCmdName)
		return exitNotStarted
	}
	first, leaseFDs, err := recvControl(uc)
	if err != nil || first.term == 0 {
		return exitNotStarted
	}
	_ = leaseFDs // held open until this process exits
	mark(stepStartReceived)

	// The deadline timers before CMD: CMD never runs unenforced.
	termT, err := newDeadlineTimer(first.termAt)
	var killT *deadlineTimer
	if err == nil {
		killT, err = newDeadlineTimer(first.killAt)
	}
	if err != nil {
		say.warn("cannot arm the lease deadline", err)
		return exitCannotExec
	}

	if err := becomeSubreaper(); err != nil {
		say.warn("cannot adopt what the command leaves behind (processes that leave its process group will escape)", err)
	}
	argv := fs.Args()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "TENURE_TERM="+strconv.FormatUint(first.term, 10))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		say.warn("cannot start "+argv[0], err)
		return exitCannotExec
	}
	mark(stepCmdStarted)
	g := &group{cmd: cmd, kids: reapChildren(cmd.Process.Pid), pg: syscall.Getpgrp(), uc: uc}
	return g.enforce(first, termT, killT, sigs)
}

// supervisorLog writes the supervisor's own messages to tenure's stderr:
// the plain line "tenure: MSG: ERR", or, under tenure run --log-format
// json (which tenure passes on), a JSON log line with the key and the
// identity (from TENURE_KEY and TENURE_ID, which tenure sets for the
// supervisor), as every line of tenure's own log is: a plain line in the
// middle of a JSON log breaks whatever reads it.
type supervisorLog struct {
	w    io.Writer
	json *slog.Logger // nil: plain lines
}

func newSupervisorLog(w io.Writer, format string) supervisorLog {
	l := supervisorLog{w: w}
	if format == "json" {
		l.json, _ = newLogger(w, format, slog.LevelInfo)
	}
	return l
}

// warn says that msg failed, for the reason err.
func (l supervisorLog) warn(msg string, err error) {
	if l.json != nil {
		l.json.Warn("tenure: "+msg, "key", os.Getenv(envKey), "id", os.Getenv(envID), "err", err.Error())
		return
	}
	fmt.Fprintf(l.w, "tenure: %s: %v\n", msg, err)
}

// controlConn is the supervisor's end of the control channel, fd 3.
// net.FileConn duplicates it with close-on-exec; fd 3 itself is closed, so
// nothing of ours leaks into CMD.
func controlConn() (*net.UnixConn, error) {
	f := os.NewFile(3, "tenure-control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("fd 3 is not a unix socket")
	}
	return uc, nil
}

// group is CMD's process group, led by this supervisor.
type group struct {
	cmd  *exec.Cmd // started; never waited for: kids reaps it
	kids *children // CMD and the orphans it leaves
	pg   int
	uc   *net.UnixConn // the control channel
}

// enforce applies the deadlines of first (to which termT and killT are
// set) and of the later messages until CMD exits, the kill deadline passes
// or tenure goes away, and returns CMD's exit code. A timer's expiry is
// acted on only if its deadline has come: one set for an earlier deadline
// may fire just before a message moves it.
func (g *group) enforce(first deadlineMsg, termT, killT *deadlineTimer, sigs <-chan os.Signal) int {
	msgs, eof := readDeadlines(g.uc)
	termAt, killAt := first.termAt, first.killAt
	for {
		select {
		case m := <-msgs:
			if m.termAt > termAt {
				termAt = m.termAt
				if termT.Set(termAt) != nil {
					return g.kill() // the deadline could not be enforced
				}
			}
			if m.killAt > killAt {
				killAt = m.killAt
				if killT.Set(killAt) != nil {
					return g.kill()
				}
			}
		case <-termT.C:
			if monoNow() >= termAt {
				// This process is in the group too: it gets the
				// SIGTERM on sigs below and passes it on to what left
				// the group, once (a second would be an order to quit
				// at once for many programs).
				_ = syscall.Kill(-g.pg, syscall.SIGTERM)
			}
		case <-killT.C:
			if monoNow() >= killAt {
				return g.kill()
			}
		case <-eof:
			return g.kill()
		case sig := <-sigs:
			// tenure signals the whole group: CMD has it already, what
			// left the group does not.
			if sig, ok := sig.(syscall.Signal); ok {
				go signalEscaped(g.pg, sig)
			}
		case <-g.kids.cmdDone:
			return g.exited()
		}
	}
}

// readDeadlines delivers the control messages after the first on msgs
// until the channel closes, then closes eof.
func readDeadlines(uc *net.UnixConn) (msgs <-chan deadlineMsg, eof <-chan struct{}) {
	m, e := make(chan deadlineMsg), make(chan struct{})
	go func() {
		defer close(e)
		for {
			msg, fds, err := recvControl(uc)
			for _, fd := range fds {
				syscall.Close(fd) // only the first message may carry files
			}
			if errors.Is(err, errControlClosed) {
				return
			}
			if err == nil {
				m <- msg
			}
		}
	}()
	return m, e
}

// kill kills CMD, waits until it is dead, then kills the rest (see
// exited). CMD goes first so that it is gone before the lease files this
// process holds are closed by its own death.
func (g *group) kill() int {
	_ = g.cmd.Process.Kill()
	<-g.kids.cmdDone
	return g.exited()
}

// exited is the end once CMD is dead: it kills every descendant left,
// within the group or not, then reports CMD's exit code to tenure and
// returns it. Descendants go before the group: leaving the group can fail
// (when tenure is gone), and the supervisor then dies with the group.
func (g *group) exited() int {
	mark(stepCmdExited)
	code := g.kids.code
	g.kids.killDescendants()
	leaveAndKill(g.pg)
	sendExit(g.uc, code)
	mark(stepExitSent)
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
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok {
		return waitCode(ws)
	}
	return ps.ExitCode()
}
