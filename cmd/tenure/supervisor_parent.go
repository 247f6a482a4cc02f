package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
)

// leaseFiler is a store whose grants are tied to open files (the local
// store's liveness files). `tenure run` hands them to the supervisor, so
// the grant lives while the supervisor does, and a crash of tenure alone
// does not end it before CMD is dead. LeaseFiles returns the files that
// stand for l's holder being alive, or an error matching [tenure.ErrLost];
// the caller must not close them.
type leaseFiler interface {
	LeaseFiles(l tenure.Lease) ([]*os.File, error)
}

// supervisor is a started `tenure __supervise` process and tenure's end of
// its control channel.
type supervisor struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	done chan struct{} // closed once CMD is gone: the supervisor reported it, or exited
	once sync.Once
	code int // CMD's exit code (the supervisor's if it never ran CMD), once done

	started  uint64      // the supervisor's start time, in clock ticks since boot
	ran      atomic.Bool // the supervisor was told to run CMD
	reported atomic.Bool // the supervisor reported CMD's exit
}

// finish records CMD's exit code and closes done, the first time.
func (s *supervisor) finish(code int) {
	s.once.Do(func() {
		s.code = code
		close(s.done)
	})
}

// supervisorPath is the file a supervisor is started from, with self (the
// path tenure was started from) as its argv[0]: on Linux /proc/self/exe,
// the running build itself even after a new build was renamed over self
// (an upgrade in place), so that tenure and its supervisor always speak
// the control protocol of one build, which carries no version; elsewhere,
// or without /proc, self.
func supervisorPath(self string) string {
	const proc = "/proc/self/exe"
	if runtime.GOOS != "linux" {
		return self
	}
	if _, err := os.Stat(proc); err != nil {
		return self
	}
	return proc
}

// spawnSupervisor starts a supervisor for CMD, in a new process group. It
// waits for its first control message before it runs CMD; closing conn
// before that makes it exit.
func (r *runner) spawnSupervisor() (*supervisor, error) {
	conn, theirs, err := controlPair()
	if err != nil {
		return nil, err
	}
	argv := []string{superviseCmdName}
	if r.opts.logFormat == "json" {
		argv = append(argv, "-log-format", "json") // its own messages, too
	}
	argv = append(append(argv, "--", r.opts.path), r.opts.args...)
	cmd := exec.Command(r.self, argv...)
	cmd.Path = supervisorPath(r.self)
	cmd.Env = append(os.Environ(), "TENURE_KEY="+r.opts.key, "TENURE_ID="+r.opts.id)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, r.stdout, r.stderr
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second // if CMD's orphans hold our output pipes
	started, err := adopted.start(cmd)
	theirs.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("cannot start the supervisor %s: %w", r.self, err)
	}
	s := &supervisor{cmd: cmd, conn: conn, done: make(chan struct{}), started: started}
	received := make(chan struct{})
	go func() {
		defer close(received)
		if code, ok := recvExit(conn); ok {
			s.reported.Store(true)
			s.finish(code)
		}
	}()
	go func() {
		_ = cmd.Wait()
		adopted.reaped(cmd)
		// The supervisor's end of the channel is closed now: its report,
		// if it sent one, is read at once, and the receiver ends.
		<-received
		if s.ran.Load() && !s.reported.Load() {
			// Killed before it could report: what CMD left outside its
			// group, orphaned to tenure, goes before CMD counts as gone.
			adopted.killOrphans(s.started)
		}
		s.finish(exitCode(cmd.ProcessState))
	}()
	return s, nil
}

// dismiss ends a supervisor that never started CMD, and waits for it.
func (s *supervisor) dismiss() {
	s.conn.Close()
	<-s.done
}

// exited reports whether the supervisor is gone (killed by someone while
// standing by).
func (s *supervisor) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// prepare starts a standby supervisor for the next term in the
// background, unless one is standing by already, so that winning does not
// wait for one to start. A failure is not fatal here: the task tries again
// and reports it.
func (r *runner) prepare() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending {
		return
	}
	r.pending = true
	go func() {
		s, err := r.spawnSupervisor()
		if err != nil {
			r.logger.Warn("tenure: cannot start a standby supervisor; will retry once elected", "key", r.opts.key, "id", r.opts.id, "err", err)
		}
		r.standby <- s
	}()
}

// takeStandby returns the standby supervisor, waiting for it if it is
// still starting, or nil if there is none.
func (r *runner) takeStandby() *supervisor {
	r.mu.Lock()
	pending := r.pending
	r.pending = false
	r.mu.Unlock()
	if !pending {
		return nil
	}
	return <-r.standby
}

// supervisorForTerm returns the standby supervisor if it is alive, else a
// new one.
func (r *runner) supervisorForTerm() (*supervisor, error) {
	s := r.takeStandby()
	if s != nil && s.exited() {
		s.conn.Close()
		s = nil
	}
	if s == nil {
		return r.spawnSupervisor()
	}
	return s, nil
}

// putBack makes s, which never started CMD, the standby again.
func (r *runner) putBack(s *supervisor) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = true
	r.standby <- s
}

// dismissStandby ends the standby supervisor, if any.
func (r *runner) dismissStandby() {
	if s := r.takeStandby(); s != nil {
		s.dismiss()
	}
}

// errNotStarted is a task's result when leadership ended, or tenure was
// told to stop, before CMD started.
var errNotStarted = errors.New("tenure: the command was not started")

// cmdExit is a task's result once CMD ran, unless it exited 0 while
// leading: its exit code, and lost, the reason leadership ended while CMD
// ran (CMD was stopped for it), if it did.
type cmdExit struct {
	code int
	lost error
}

func (e *cmdExit) Error() string {
	if e.lost != nil {
		return fmt.Sprintf("the command was stopped (exit code %d): %v", e.code, e.lost)
	}
	return fmt.Sprintf("the command exited with code %d", e.code)
}

func (e *cmdExit) Unwrap() error { return e.lost }

// task is the elector's leader task: it has the standby supervisor run CMD
// for one term and returns when the supervisor has exited. When the leader
// context is cancelled it stops CMD's group (SIGTERM, then SIGKILL after the
// grace period) and still waits for the supervisor, so the elector releases
// the lease only once CMD is gone. After a signal to tenure its result is
// the last ([tenure.Last]): the elector's loop ends with it.
func (r *runner) task(ctx context.Context) error {
	mark(stepTask)
	term, _ := tenure.TermFrom(ctx)
	sup, err := r.supervisorForTerm()
	if err != nil {
		return r.result(err)
	}
	feed, err := r.startCmd(ctx, term, sup)
	if err != nil {
		return r.result(err)
	}
	mark(stepStartSent)
	defer sup.conn.Close()
	stopFollowing := followRenewals(term, feed)
	defer stopFollowing()
	pg := sup.cmd.Process.Pid
	log := r.logger.With("key", r.opts.key, "id", r.opts.id, "term", term.Lease().Term)
	log.Info("tenure: command started", "cmd", r.opts.path, "pgid", pg)

	lost := r.await(ctx, sup, log)
	if lost == nil {
		r.handOver(term, log) // --handover, after a SIGTERM
	}
	r.mu.Lock()
	r.pg = 0
	r.mu.Unlock()
	// Whatever CMD left behind in its group goes too (normally nothing: the
	// supervisor saw to it), before the elector may release the lease.
	if syscall.Kill(-pg, syscall.SIGKILL) == nil {
		waitGroupGone(pg, r.opts.grace)
	}
	mark(stepCmdGone)
	return r.result(r.outcome(term, sup.code, lost, log))
}

// outcome logs how CMD's run ended and returns the task's result for it.
func (r *runner) outcome(term *tenure.Term, code int, lost error, log *slog.Logger) error {
	switch {
	case code == exitNotStarted || code == exitCannotExec:
		log.Warn("tenure: the supervisor could not run the command", "code", code)
	case lost == nil && !time.Now().Before(term.Deadline()):
		// tenure itself was late (frozen, starved): the supervisor stopped
		// CMD at the deadline, before the elector noticed.
		log.Warn("tenure: the supervisor stopped the command at the renew deadline", "code", code)
		lost = fmt.Errorf("%w (the supervisor stopped the command; exit code %d)", tenure.ErrRenewDeadline, code)
	case lost == nil:
		log.Info("tenure: command exited", "code", code)
	}
	switch {
	case lost != nil && r.moves && errors.Is(lost, context.Canceled):
		log.Info("tenure: the key moved away or tenure is stopping; the command was stopped", "code", code)
	case lost != nil && r.signalled() == 0 && !errors.Is(lost, tenure.ErrSteppedDown):
		log.Warn("tenure: leadership lost while the command ran; it was stopped", "err", lost)
	}
	if code == 0 && lost == nil {
		return nil
	}
	return &cmdExit{code: code, lost: lost}
}

// result is the task's result err, marked as the last after a signal.
func (r *runner) result(err error) error {
	if r.signalled() != 0 {
		return tenure.Last(err)
	}
	return err
}

// startCmd has sup start CMD for term, unless tenure is stopping or
// leadership already ended (errNotStarted; sup stands by again). From then
// on, signals to tenure are forwarded to CMD's group.
func (r *runner) startCmd(ctx context.Context, term *tenure.Term, sup *supervisor) (*deadlineFeed, error) {
	lease := term.Lease()
	var leaseFiles []*os.File
	if lf, ok := r.store.(leaseFiler); ok {
		files, err := lf.LeaseFiles(lease)
		if err != nil {
			r.putBack(sup)
			return nil, fmt.Errorf("lease files of term %d: %w", lease.Term, err)
		}
		leaseFiles = files
	}
	feed := &deadlineFeed{grace: r.opts.grace, c: sup.conn}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sig != 0 || ctx.Err() != nil {
		r.pending = true
		r.standby <- sup
		return nil, errNotStarted
	}
	// The supervisor starts CMD on this message, with the elector's own
	// deadline for this term (set at the acquisition, or later by a
	// renewal), and follows it as renewals move it.
	sup.ran.Store(true)
	if err := feed.start(term, leaseFiles); err != nil {
		_ = syscall.Kill(-sup.cmd.Process.Pid, syscall.SIGKILL)
		<-sup.done
		return nil, err
	}
	r.pg = sup.cmd.Process.Pid
	return feed, nil
}

// await waits for the supervisor to exit. If the leader context is
// cancelled first it stops CMD's group (SIGTERM, then SIGKILL after the
// grace period) and returns the cause.
func (r *runner) await(ctx context.Context, sup *supervisor, log *slog.Logger) (lost error) {
	select {
	case <-sup.done:
		return nil
	case <-ctx.Done():
	}
	pg := sup.cmd.Process.Pid
	lost = context.Cause(ctx)
	log.Info("tenure: stopping the command", "why", lost.Error(), "grace", r.opts.grace)
	// At the renew deadline the supervisor sends the group SIGTERM itself
	// (its stop deadline is that one, or an earlier one if a renewal's
	// message never reached it): a second SIGTERM is, for many programs,
	// an order to quit at once, without the graceful stop the first began.
	if !errors.Is(lost, tenure.ErrRenewDeadline) {
		_ = syscall.Kill(-pg, syscall.SIGTERM)
	}
	t := time.NewTimer(r.opts.grace)
	defer t.Stop()
	select {
	case <-sup.done:
	case <-t.C:
		log.Warn("tenure: the command outlived --grace; killing its process group", "grace", r.opts.grace)
		killGroup(sup, pg)
	}
	return lost
}

// killGroup SIGKILLs CMD's process group pg but for the supervisor that
// leads it, and waits for the supervisor to exit: told to by the end of
// its control channel, it kills CMD and every descendant CMD left, in the
// group or not, before it exits. Killed with the group, it would leave
// those outside it running. tenure kills those it finds under the
// supervisor too, so that they are gone at once even if the supervisor
// cannot act (stopped); one that does not exit in time is killed with what
// is left of the group, and what it adopted since is adopted by tenure
// (see orphanage.killOrphans). A supervisor found stopped (CMD may stop
// its parent) is killed so at once, not after that wait, so that the task
// ends before the lease can lapse.
func killGroup(sup *supervisor, pg int) {
	_ = sup.conn.Close()
	kids := readProcs()
	for pid := range kids.descendants(pg) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, siblings := range kids {
		for _, p := range siblings {
			if p.pid != pg && p.pgrp == pg {
				_ = syscall.Kill(p.pid, syscall.SIGKILL)
			}
		}
	}
	pollUntil(descendantsLimit+time.Second, sup.done, func() bool { return stopped(pg) })
	if !sup.exited() {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
		<-sup.done
	}
}

// stopped reports whether process pid is stopped by a signal or a tracer.
func stopped(pid int) bool {
	f, ok := procStat(pid)
	return ok && len(f) > 0 && (f[0] == "T" || f[0] == "t")
}

// followRenewals passes every deadline the elector sets for term on to
// the supervisor, until the returned func is called (it waits for the
// goroutine to end).
func followRenewals(term *tenure.Term, feed *deadlineFeed) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-term.Renewed():
				feed.advance(term)
			case <-quit:
				return
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// waitGroupGone waits, up to limit, until every member of process group pg
// is dead (exited; it may still await reaping by its new parent). It polls
// with a growing period, as nothing signals it. In the normal course it
// returns at once: the supervisor killed and reaped CMD already.
func waitGroupGone(pg int, limit time.Duration) {
	pollUntil(limit, nil, func() bool { return !groupAlive(pg) })
}

// groupAlive reports whether process group pg has a member that is not a
// zombie.
func groupAlive(pg int) bool {
	if syscall.Kill(-pg, 0) == syscall.ESRCH {
		return false
	}
	alive, group := false, strconv.Itoa(pg)
	if !eachProc(func(_ int, f []string) bool {
		alive = len(f) >= 3 && f[2] == group && f[0] != "Z"
		return !alive
	}) {
		return true // /proc unreadable: assume the worst
	}
	return alive
}

// eachProc calls fn with the pid and the /proc/PID/stat fields after the
// command name (state, ppid, pgrp, ...) of every process, until fn returns
// false. It returns false if /proc cannot be read.
func eachProc(fn func(pid int, stat []string) bool) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := procStat(pid); ok && !fn(pid, f) {
			break
		}
	}
	return true
}

// procStat returns the fields of /proc/PID/stat after the command name,
// which may hold spaces and parentheses.
func procStat(pid int) ([]string, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}
