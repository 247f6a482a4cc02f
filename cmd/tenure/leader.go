package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
)

// task is the elector's leader task: it runs CMD under a supervisor for one
// term and returns when the supervisor has exited. When the leader context
// is cancelled it stops CMD's group (SIGTERM, then SIGKILL after the grace
// period) and still waits for the supervisor, so the elector releases the
// lease only once CMD is gone.
func (r *runner) task(ctx context.Context) error {
	lease, _ := tenure.LeaseFrom(ctx)
	var leaseFiles []*os.File
	if lf, ok := r.store.(tenure.LeaseFiler); ok {
		files, err := lf.LeaseFiles(lease)
		if err != nil {
			return fmt.Errorf("lease files of term %d: %w", lease.Term, err)
		}
		leaseFiles = files
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("control pipe: %w", err)
	}
	feed := &deadlineFeed{renewDeadline: r.opts.renewDeadline, grace: r.opts.grace, w: pw}
	defer feed.close()
	r.mu.Lock()
	r.feed = feed
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.feed = nil
		r.mu.Unlock()
	}()
	// The first deadline waits in the pipe; the supervisor reads it before
	// it starts CMD. Renewals from now on advance it.
	feed.advance(r.elector.Status().Deadline)

	argv := append([]string{superviseCmdName, "--lease-fds", strconv.Itoa(len(leaseFiles)), "--", r.opts.path}, r.opts.args...)
	cmd := exec.Command(r.self, argv...)
	cmd.Env = append(os.Environ(),
		"TENURE_KEY="+lease.Key,
		"TENURE_ID="+lease.Identity,
		"TENURE_TERM="+strconv.FormatUint(lease.Term, 10))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, r.stdout, r.stderr
	cmd.ExtraFiles = append([]*os.File{pr}, leaseFiles...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Second // if CMD's orphans hold our output pipes

	r.mu.Lock()
	if r.stopping || ctx.Err() != nil {
		r.mu.Unlock()
		pr.Close()
		return nil
	}
	err = cmd.Start()
	if err == nil {
		r.pg = cmd.Process.Pid
	}
	r.mu.Unlock()
	pr.Close()
	if err != nil {
		return fmt.Errorf("cannot start the supervisor %s: %w", r.self, err)
	}
	pg := cmd.Process.Pid
	log := r.logger.With("key", lease.Key, "id", lease.Identity, "term", lease.Term)
	log.Info("tenure: command started", "cmd", r.opts.path, "pgid", pg)

	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		log.Info("tenure: stopping the command", "why", context.Cause(ctx).Error(), "grace", r.opts.grace)
		_ = syscall.Kill(-pg, syscall.SIGTERM)
		t := time.NewTimer(r.opts.grace)
		select {
		case <-done:
		case <-t.C:
			log.Warn("tenure: the command outlived --grace; killing its process group", "grace", r.opts.grace)
			_ = syscall.Kill(-pg, syscall.SIGKILL)
			<-done
		}
		t.Stop()
	}
	code := exitCode(cmd.ProcessState)
	r.mu.Lock()
	r.pg, r.code = 0, code
	r.mu.Unlock()
	// Whatever CMD left behind in its group goes too (normally nothing: the
	// supervisor saw to it), before the elector may release the lease.
	if syscall.Kill(-pg, syscall.SIGKILL) == nil {
		waitGroupGone(pg, r.opts.grace)
	}
	log.Info("tenure: command exited", "code", code)
	return nil
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
