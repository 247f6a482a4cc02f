package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
)

// supervisor is a started `tenure __supervise` process and tenure's end of
// its control channel.
type supervisor struct {
	cmd  *exec.Cmd
	conn *net.UnixConn
	done chan struct{} // closed once it exited and was reaped
}

// spawnSupervisor starts a supervisor for CMD, in a new process group. It
// waits for its first control message before it runs CMD; closing conn
// before that makes it exit.
func (r *runner) spawnSupervisor() (*supervisor, error) {
	conn, theirs, err := controlPair()
	if err != nil {
		return nil, err
	}
	argv := append([]string{superviseCmdName, "--", r.opts.path}, r.opts.args...)
	cmd := exec.Command(r.self, argv...)
	cmd.Env = append(os.Environ(), "TENURE_KEY="+r.opts.key, "TENURE_ID="+r.opts.id)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, r.stdout, r.stderr
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second // if CMD's orphans hold our output pipes
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("cannot start the supervisor %s: %w", r.self, err)
	}
	s := &supervisor{cmd: cmd, conn: conn, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	return s, nil
}

// dismiss ends a supervisor that never started CMD, and waits for it.
func (s *supervisor) dismiss() {
	s.conn.Close()
	<-s.done
}

// prepare makes sure a supervisor is standing by for the next term, so
// that winning does not wait for one to start. A failure is not fatal here:
// the task tries again and reports it.
func (r *runner) prepare() {
	if r.standby != nil {
		return
	}
	s, err := r.spawnSupervisor()
	if err != nil {
		r.logger.Warn("tenure: cannot start a standby supervisor; will retry once elected", "err", err)
		return
	}
	r.standby = s
}

// dismissStandby ends the standby supervisor, if any.
func (r *runner) dismissStandby() {
	if r.standby != nil {
		r.standby.dismiss()
		r.standby = nil
	}
}

// leaseFiler is the ability of a store whose grants are tied to open files,
// such as the local store's per-grant lock file, which the kernel releases
// when the holding process dies. `tenure run` passes these files to the
// process that supervises its child, so a crash of tenure itself does not
// end the grant early: it stays held while the supervisor lives, within its
// TTL, and the supervisor stops the child before the TTL passes.
type leaseFiler interface {
	// LeaseFiles returns the files that stand for l's holder being alive,
	// or an error matching tenure.ErrLost if l is not held through this
	// handle. The caller must not close them.
	LeaseFiles(l tenure.Lease) ([]*os.File, error)
}

// task is the elector's leader task: it has the standby supervisor run CMD
// for one term and returns when the supervisor has exited. When the leader
// context is cancelled it stops CMD's group (SIGTERM, then SIGKILL after the
// grace period) and still waits for the supervisor, so the elector releases
// the lease only once CMD is gone.
func (r *runner) task(ctx context.Context) error {
	term, _ := tenure.TermFrom(ctx)
	lease := term.Lease()
	var leaseFiles []*os.File
	if lf, ok := r.store.(leaseFiler); ok {
		files, err := lf.LeaseFiles(lease)
		if err != nil {
			return fmt.Errorf("lease files of term %d: %w", lease.Term, err)
		}
		leaseFiles = files
	}
	sup := r.standby
	r.standby = nil
	if sup != nil {
		select {
		case <-sup.done: // died while standing by (killed by someone)
			sup.conn.Close()
			sup = nil
		default:
		}
	}
	if sup == nil {
		var err error
		if sup, err = r.spawnSupervisor(); err != nil {
			return err
		}
	}
	feed := &deadlineFeed{grace: r.opts.grace, c: sup.conn}
	defer sup.conn.Close()

	pg := sup.cmd.Process.Pid
	r.mu.Lock()
	if r.stopping || ctx.Err() != nil {
		r.mu.Unlock()
		sup.dismiss()
		return nil
	}
	// The supervisor starts CMD on this message, with the elector's own
	// deadline for this term (set at the acquisition, or later by a
	// renewal), and follows it as renewals move it.
	err := feed.start(lease.Term, term.Deadline(), leaseFiles)
	if err == nil {
		r.pg = pg
	}
	r.mu.Unlock()
	if err != nil {
		_ = syscall.Kill(-pg, syscall.SIGKILL)
		<-sup.done
		return err
	}
	stopFollowing := followRenewals(term, feed)
	defer stopFollowing()
	log := r.logger.With("key", lease.Key, "id", lease.Identity, "term", lease.Term)
	log.Info("tenure: command started", "cmd", r.opts.path, "pgid", pg)

	select {
	case <-sup.done:
	case <-ctx.Done():
		log.Info("tenure: stopping the command", "why", context.Cause(ctx).Error(), "grace", r.opts.grace)
		_ = syscall.Kill(-pg, syscall.SIGTERM)
		t := time.NewTimer(r.opts.grace)
		select {
		case <-sup.done:
		case <-t.C:
			log.Warn("tenure: the command outlived --grace; killing its process group", "grace", r.opts.grace)
			_ = syscall.Kill(-pg, syscall.SIGKILL)
			<-sup.done
		}
		t.Stop()
	}
	code := exitCode(sup.cmd.ProcessState)
	r.mu.Lock()
	r.pg, r.code = 0, code
	r.mu.Unlock()
	// Whatever CMD left behind in its group goes too (normally nothing: the
	// supervisor saw to it), before the elector may release the lease.
	if syscall.Kill(-pg, syscall.SIGKILL) == nil {
		waitGroupGone(pg, r.opts.grace)
	}
	switch {
	case code == exitNotStarted || code == exitCannotExec:
		log.Warn("tenure: the supervisor could not run the command", "code", code)
	case ctx.Err() == nil && !time.Now().Before(feed.deadline()):
		// tenure itself was late (frozen, starved): the supervisor stopped
		// CMD at the deadline, before the elector noticed.
		log.Warn("tenure: the supervisor stopped the command at the renew deadline", "code", code)
		return fmt.Errorf("%w (the supervisor stopped the command; exit code %d)", tenure.ErrRenewDeadline, code)
	default:
		log.Info("tenure: command exited", "code", code)
	}
	return nil
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
				feed.advance(term.Deadline())
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
	deadline := time.Now().Add(limit)
	for d := 100 * time.Microsecond; groupAlive(pg) && time.Now().Before(deadline); d = min(2*d, 10*time.Millisecond) {
		time.Sleep(d)
	}
}

// groupAlive reports whether process group pg has a member that is not a
// zombie.
func groupAlive(pg int) bool {
	if syscall.Kill(-pg, 0) == syscall.ESRCH {
		return false
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(data)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[2] == strconv.Itoa(pg) && f[0] != "Z" && pid > 0 {
			return true
		}
	}
	return false
}
