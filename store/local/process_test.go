//go:build linux

package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
	"github.com/tenurehq/tenure/storetest"
)

// The helper process: the test binary re-executed with helperEnv set runs
// TestHelperProcess, which acts as another process using the store. It
// speaks a line protocol on stdin/stdout:
//
//	mode "acquire": Acquire key for ttl and print "acquired TERM"; then
//	  for each "renew" line print "renewed", "lost" (ErrLost) or "error ...".
//	mode "open": Open dir and print "opened" or "error MESSAGE".
//	mode "contend": acquire key HELPER_ROUNDS times, waiting with Watch,
//	  appending "enter TERM ID" and "exit TERM ID" to HELPER_LOG while
//	  holding it, then print "done".
//	mode "grab": open HELPER_PATH read-only as an attacker with read access
//	  would, take every lock it can on it (flock LOCK_EX and LOCK_SH, an
//	  OFD write lock, an OFD read lock), print "grabbed RESULTS" or
//	  "error MESSAGE", and hold them until stdin closes.
//	mode "inherit": hold file descriptor 3 (a liveness file passed by the
//	  parent) open, print "holding", and wait for stdin to close.
//	mode "session": open a session of HELPER_TTL, acquire each key of
//	  HELPER_KEYS (comma-separated) in it and print "acquired TERM,...";
//	  then for each "keepalive" line print "kept", "lost" or "error ...".
const helperEnv = "TENURE_LOCAL_HELPER"

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("runs only as a helper process of the tests in this package")
	}
	in := bufio.NewScanner(os.Stdin)
	say := func(format string, args ...any) { fmt.Printf("helper: "+format+"\n", args...) }
	switch mode {
	case "acquire":
		ttl, _ := time.ParseDuration(os.Getenv("HELPER_TTL"))
		s, err := local.Open(os.Getenv("HELPER_DIR"))
		if err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		ctx := context.Background()
		l, err := s.Acquire(ctx, os.Getenv("HELPER_KEY"), "child", ttl)
		if err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		say("acquired %d", l.Term)
		for in.Scan() {
			switch err := s.Renew(ctx, l); {
			case err == nil:
				say("renewed")
			case errors.Is(err, tenure.ErrLost):
				say("lost")
			default:
				say("error %v", err)
			}
		}
	case "open":
		s, err := local.Open(os.Getenv("HELPER_DIR"))
		if err != nil {
			say("error %v", err)
		} else {
			say("opened")
			s.Close()
		}
	case "contend":
		if err := contend(); err != nil {
			say("error %v", err)
			os.Exit(1)
		}
		say("done")
	case "grab":
		f, err := os.OpenFile(os.Getenv("HELPER_PATH"), os.O_RDONLY, 0)
		if err != nil {
			say("error %v", err)
			os.Exit(0)
		}
		say("grabbed %s", grab(f))
		for in.Scan() {
		}
		f.Close()
	case "session":
		if err := sessionHelper(in, say); err != nil {
			say("error %v", err)
			os.Exit(1)
		}
	case "inherit":
		f := os.NewFile(3, "inherited")
		if f == nil {
			say("error no fd 3")
			os.Exit(1)
		}
		say("holding")
		for in.Scan() {
		}
		f.Close()
	}
	os.Exit(0)
}

// child is a running helper process.
type child struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startChild(t *testing.T, mode string, env []string, files ...*os.File) *child {
	t.Helper()
	return startChildCmd(t, exec.Command(os.Args[0]), mode, env, files...)
}

// startChildCmd starts cmd, whose Path is a copy of the test binary, as a
// helper.
func startChildCmd(t *testing.T, cmd *exec.Cmd, mode string, env []string, files ...*os.File) *child {
	t.Helper()
	cmd.Args = append(cmd.Args, "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode}, env...)...)
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper: %v", err)
	}
	c := &child{t: t, cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Wait()
	})
	return c
}

// line returns the helper's next protocol line, without its prefix.
func (c *child) line() string {
	c.t.Helper()
	for c.out.Scan() {
		if s, ok := strings.CutPrefix(c.out.Text(), "helper: "); ok {
			return s
		}
	}
	c.t.Fatalf("helper exited without answering: %v", c.out.Err())
	return ""
}

func (c *child) send(cmd string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, cmd+"\n"); err != nil {
		c.t.Fatalf("write to helper: %v", err)
	}
}

// acquiringChild starts a helper holding key for ttl and returns its term.
func acquiringChild(t *testing.T, dir, key string, ttl time.Duration) (*child, uint64) {
	t.Helper()
	c := startChild(t, "acquire", []string{"HELPER_DIR=" + dir, "HELPER_KEY=" + key, "HELPER_TTL=" + ttl.String()})
	got := c.line()
	term, err := strconv.ParseUint(strings.TrimPrefix(got, "acquired "), 10, 64)
	if err != nil || !strings.HasPrefix(got, "acquired ") {
		t.Fatalf("helper said %q, want \"acquired TERM\"", got)
	}
	return c, term
}

func free(r tenure.Record) bool { return !r.Held() }

// A holder process killed with SIGKILL loses its grant at once: a watcher
// learns of it from the kernel closing the liveness file, and takes over
// long before the 30s TTL.
func TestCrashTakeover(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	dir := t.TempDir()
	s := open(t, dir)
	key := "crash/takeover"
	var took []time.Duration
	for round := range 5 {
		c, term := acquiringChild(t, dir, key, ttl)
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := s.Watch(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		r := storetest.Await(t, ch, 5*time.Second, "the child's grant", func(r tenure.Record) bool { return r.Holder == "child" })
		if r.Term != term {
			t.Fatalf("watch says term %d, child acquired %d", r.Term, term)
		}
		if _, err := s.Acquire(context.Background(), key, "parent", ttl); !errors.Is(err, tenure.ErrHeld) {
			t.Fatalf("Acquire while the child lives: %v, want ErrHeld", err)
		}
		killed := time.Now()
		if err := c.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		storetest.Await(t, ch, 5*time.Second, "the child's death", free)
		l, err := s.Acquire(context.Background(), key, "parent", ttl)
		if err != nil {
			t.Fatalf("Acquire after the holder died: %v", err)
		}
		d := time.Since(killed)
		cancel()
		took = append(took, d)
		if l.Term <= term {
			t.Fatalf("takeover term %d not above the dead holder's %d", l.Term, term)
		}
		if d >= ttl/6 {
			t.Fatalf("round %d: takeover took %s, too close to the TTL of %s to come from the crash", round, d, ttl)
		}
		if err := s.Release(context.Background(), l); err != nil {
			t.Fatal(err)
		}
		_ = c.cmd.Wait()
	}
	slices.Sort(took)
	t.Logf("SIGKILL → watch wake-up → Acquire: min %s, median %s, max %s over %d rounds", took[0], took[len(took)/2], took[len(took)-1], len(took))
}

// A holder that is alive but stopped keeps its lock, yet loses its grant
// when its TTL passes, not earlier; once resumed, its Renew fails.
func TestStalledHolderLosesByTTL(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	dir := t.TempDir()
	s := open(t, dir)
	key := "stalled"
	c, term := acquiringChild(t, dir, key, ttl)
	sent := time.Now() // the store receives the renewal after this
	c.send("renew")
	if got := c.line(); got != "renewed" {
		t.Fatalf("helper Renew: %s", got)
	}
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	ch := watch(t, s, key)
	storetest.Await(t, ch, time.Second, "the held record", func(r tenure.Record) bool { return r.Holder == "child" && r.Term == term })
	if _, err := s.Acquire(context.Background(), key, "parent", ttl); !errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire while the stopped holder's TTL runs: %v, want ErrHeld", err)
	}
	storetest.Await(t, ch, ttl+2*time.Second, "the expiry", free)
	freed := time.Now()
	// 1% allowed for the difference between CLOCK_BOOTTIME and Go's clock.
	if early := sent.Add(ttl - ttl/100).Sub(freed); early > 0 {
		t.Fatalf("stopped holder lost its grant %s before its TTL passed", early)
	}
	l, err := s.Acquire(context.Background(), key, "parent", 10*ttl)
	if err != nil {
		t.Fatalf("Acquire after the stopped holder's TTL: %v", err)
	}
	t.Logf("stopped holder freed %s after its last renewal was sent (TTL %s)", freed.Sub(sent), ttl)
	if err := c.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.send("renew")
	if got := c.line(); got != "lost" {
		t.Fatalf("resumed holder's Renew: %s, want ErrLost", got)
	}
	if r, err := s.Get(context.Background(), key); err != nil || r.Holder != "parent" || r.Term != l.Term || l.Term <= term {
		t.Fatalf("after the stale Renew, Get = %+v, %v; want parent holding term %d > %d", r, err, l.Term, term)
	}
}

// A liveness file passed to a child process keeps the grant live after the
// acquiring handle is gone, until the child exits too.
func TestLeaseFilesOutliveHandle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	key := "inherited"
	a, b := open(t, dir), open(t, dir)
	l := acquire(t, a, key, "alpha", time.Minute)
	files, err := a.LeaseFiles(l)
	if err != nil || len(files) != 1 {
		t.Fatalf("LeaseFiles = %v, %v; want one file", files, err)
	}
	if _, err := b.LeaseFiles(l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("LeaseFiles through another handle: %v, want ErrLost", err)
	}
	c := startChild(t, "inherit", nil, files[0])
	if got := c.line(); got != "holding" {
		t.Fatalf("helper said %q", got)
	}
	ch := watchHeld(t, b, key, "alpha")
	a.Close() // closes the parent's descriptor; the child's keeps the lock
	if _, err := b.Acquire(context.Background(), key, "beta", time.Minute); !errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire while the child holds the inherited file: %v, want ErrHeld", err)
	}
	if err := c.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, 5*time.Second, "the end of the grant once the child died", free)
	l2, err := b.Acquire(context.Background(), key, "beta", time.Minute)
	if err != nil || l2.Term <= l.Term {
		t.Fatalf("Acquire after the child died = %+v, %v; want a term above %d", l2, err, l.Term)
	}
}

// contend is the "contend" helper mode.
func contend() error {
	rounds, _ := strconv.Atoi(os.Getenv("HELPER_ROUNDS"))
	key, id := os.Getenv("HELPER_KEY"), strconv.Itoa(os.Getpid())
	s, err := local.Open(os.Getenv("HELPER_DIR"))
	if err != nil {
		return err
	}
	defer s.Close()
	log, err := os.OpenFile(os.Getenv("HELPER_LOG"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ch, err := s.Watch(ctx, key)
	if err != nil {
		return err
	}
	// With HELPER_SESSION set, every grant is made in a session, which
	// every third round closes (freeing the key) instead of releasing.
	var ss tenure.StoreSession
	acquire := func() (tenure.Lease, error) { return s.Acquire(ctx, key, id, 10*time.Second) }
	release := func(l tenure.Lease, round int) error { return s.Release(ctx, l) }
	if os.Getenv("HELPER_SESSION") != "" {
		acquire = func() (tenure.Lease, error) {
			if ss == nil {
				if ss, err = s.OpenSession(ctx, 10*time.Second); err != nil {
					return tenure.Lease{}, err
				}
			}
			return ss.Acquire(ctx, key, id, "")
		}
		release = func(l tenure.Lease, round int) error {
			if round%3 != 2 {
				return ss.Release(ctx, l)
			}
			err := ss.Close(ctx)
			ss = nil
			return err
		}
	}
	for done := 0; done < rounds; {
		l, err := acquire()
		if errors.Is(err, tenure.ErrHeld) {
			for r := range ch {
				if !r.Held() {
					break
				}
			}
			continue
		}
		if err != nil {
			return err
		}
		// One write each, so O_APPEND keeps lines whole.
		if _, err := fmt.Fprintf(log, "enter %d %s\n", l.Term, id); err != nil {
			return err
		}
		if _, err := fmt.Fprintf(log, "exit %d %s\n", l.Term, id); err != nil {
			return err
		}
		if err := release(l, done); err != nil {
			return err
		}
		done++
	}
	return nil
}

// Processes contending for one key hold it one at a time, in strictly
// increasing terms.
func TestProcessesExcludeEachOther(t *testing.T) { processesExcludeEachOther(t, false) }

// The same with every grant made in a session, which is sometimes closed
// instead of releasing the key.
func TestSessionProcessesExcludeEachOther(t *testing.T) { processesExcludeEachOther(t, true) }

func processesExcludeEachOther(t *testing.T, sessions bool) {
	t.Parallel()
	const procs, rounds = 4, 25
	dir := t.TempDir()
	logPath := filepath.Join(t.TempDir(), "log")
	writeFile(t, logPath, nil)
	env := []string{"HELPER_DIR=" + dir, "HELPER_KEY=contended", "HELPER_LOG=" + logPath, "HELPER_ROUNDS=" + strconv.Itoa(rounds)}
	if sessions {
		env = append(env, "HELPER_SESSION=1")
	}
	var children []*child
	for range procs {
		children = append(children, startChild(t, "contend", env))
	}
	for _, c := range children {
		if got := c.line(); got != "done" {
			t.Fatalf("helper: %s", got)
		}
	}
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 2*procs*rounds {
		t.Fatalf("%d log lines, want %d", len(lines), 2*procs*rounds)
	}
	var last uint64
	for i := 0; i < len(lines); i += 2 {
		var in, out struct {
			what string
			term uint64
			id   string
		}
		fmt.Sscan(lines[i], &in.what, &in.term, &in.id)
		fmt.Sscan(lines[i+1], &out.what, &out.term, &out.id)
		if in.what != "enter" || out.what != "exit" || in.term != out.term || in.id != out.id {
			t.Fatalf("two holders at once: %q then %q", lines[i], lines[i+1])
		}
		if in.term <= last {
			t.Fatalf("term %d after term %d", in.term, last)
		}
		last = in.term
	}
}
