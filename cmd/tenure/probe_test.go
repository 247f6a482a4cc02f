package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/internal/testserver"
)

// waitingLine is what tenure logs when its first read of the store cannot
// reach the server.
const waitingLine = "cannot reach the store yet"

// TestRunWaitsForAStoreThatIsStarting: a tenure run started while its
// store's server is down says so once, reads the key again until the
// server answers (within one TTL), then leads. It used to exit 1 at the
// first refused connection on Redis and PostgreSQL, while on etcd and
// ZooKeeper it waited, their clients reconnecting by themselves.
func TestRunWaitsForAStoreThatIsStarting(t *testing.T) {
	t.Parallel()
	redis := testserver.Redis(t, false)
	pg := testserver.Postgres(t)
	for name, srv := range map[string]struct {
		url         string
		stop, start func() error
	}{
		"redis":    {redis.URL(0), redis.Stop, redis.Start},
		"postgres": {pg.URL(), pg.Stop, pg.Start},
	} {
		t.Run(name, func(t *testing.T) {
			if err := srv.stop(); err != nil {
				t.Fatal(err)
			}
			var stdout syncbuf.Buffer
			c, done := startLogged(t, &stdout, "run", "--store", srv.url, "--key", "probe-"+name, "--ttl", "30s", "--", "sh", "-c", "echo led")
			c.awaitLog(t, waitingLine)
			if err := srv.start(); err != nil {
				t.Fatal(err)
			}
			log := c.readLog()
			waitDone(t, done, time.Minute, "tenure run")
			if code := exitCode(c.cmd.ProcessState); code != 0 || stdout.String() != "led\n" {
				t.Fatalf("tenure run: exit %d, stdout %q, stderr %q; want 0 and its command run", code, stdout.String(), log)
			}
			if n := strings.Count(strings.Join(log, "\n"), waitingLine); n != 1 {
				t.Errorf("the wait was logged %d times, want once: %q", n, log)
			}
		})
	}
}

// TestRunDoesNotWaitOnARefusal: a server that answers with a refusal (a
// wrong password) fails the first read at once, as before: no wait.
func TestRunDoesNotWaitOnARefusal(t *testing.T) {
	t.Parallel()
	redis := testserver.Redis(t, false)
	wrong := strings.Replace(redis.URL(0), redis.Password, "not-"+redis.Password, 1)
	r := runTenure(t, "run", "--store", wrong, "--key", "refused", "--ttl", "30s", "--", "true")
	if r.code != exitRuntime || strings.Contains(r.stderr, waitingLine) || !strings.Contains(r.stderr, `cannot read key "refused"`) {
		t.Fatalf("exit %d, stderr %q; want %d at once, without waiting", r.code, r.stderr, exitRuntime)
	}
}

// sqlStateError is an error with a PostgreSQL SQLSTATE, as pgconn's.
type sqlStateError string

func (e sqlStateError) Error() string    { return "SQLSTATE " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

// TestMayPass: which failures of the first read are waited out.
func TestMayPass(t *testing.T) {
	for err, want := range map[error]bool{
		fmt.Errorf("get: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}):               true,
		fmt.Errorf("get: %w", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}):                 true,
		fmt.Errorf("get: %w", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "db"}}): true,
		fmt.Errorf("connect: %w", sqlStateError("57P03")):                                                    true,
		fmt.Errorf("connect: %w", sqlStateError("28P01")):                                                    false, // a wrong password
		fmt.Errorf("get: %w", &net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}):     false,
		fmt.Errorf("get: %w", &net.OpError{Op: "local error", Err: errors.New("tls: unexpected message")}):   false,
		errors.New("WRONGPASS invalid username-password pair"):                                               false,
	} {
		if got := mayPass(err); got != want {
			t.Errorf("mayPass(%v) = %v, want %v", err, got, want)
		}
	}
}

// refusedStoreURL returns a Redis URL on a loopback port nothing listens
// on: every connection to it is refused, and tenure waits for it.
func refusedStoreURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "redis://" + addr + "/0"
}

// TestRunStoppedWhileWaitingForTheStore: a tenure run still waiting for
// its store to answer, stopped with SIGINT or SIGTERM, exits at once with
// 128+n, as a candidate waiting for the key does. It used to hold the
// signal until the wait ran out (one TTL: here a minute), then exit 1
// saying the store could not be read.
func TestRunStoppedWhileWaitingForTheStore(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			var stdout syncbuf.Buffer
			c, done := startLogged(t, &stdout, "run", "--store", refusedStoreURL(t), "--key", "stopped-waiting", "--ttl", "1m", "--", "sh", "-c", "echo ran")
			c.awaitLog(t, waitingLine)
			if err := c.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			c.readLog()
			// Well within the minute it would otherwise wait.
			waitDone(t, done, 20*time.Second, "tenure run stopped while waiting for the store")
			if code := exitCode(c.cmd.ProcessState); code != 128+int(sig) || stdout.String() != "" {
				t.Fatalf("exit %d, stdout %q; want %d and nothing run", code, stdout.String(), 128+int(sig))
			}
		})
	}
}

// TestWatchStoppedWhileWaitingForTheStore: tenure watch stopped while it
// still waits for its store to answer ends as any stopped watch does,
// exit 0, not 1 with "cannot read key".
func TestWatchStoppedWhileWaitingForTheStore(t *testing.T) {
	t.Parallel()
	c, done := startLogged(t, nil, "watch", "--store", refusedStoreURL(t), "--key", "stopped-waiting")
	c.awaitLog(t, waitingLine)
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	log := c.readLog()
	waitDone(t, done, 20*time.Second, "tenure watch stopped while waiting for the store")
	if code := exitCode(c.cmd.ProcessState); code != 0 || strings.Contains(strings.Join(log, "\n"), "cannot read") {
		t.Fatalf("exit %d, log %q; want 0 and no error", code, log)
	}
}

// unanswered names the deadline a store client that retries on its own
// ran into, and leaves every other error alone.
func TestUnanswered(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := unanswered(expired, fmt.Errorf("etcd: %w", context.DeadlineExceeded))
	if want := "the store did not answer within 30s: etcd: context deadline exceeded"; err.Error() != want {
		t.Errorf("unanswered = %q, want %q", err, want)
	}
	stopped, stop := context.WithCancel(context.Background())
	stop()
	for _, c := range []struct {
		ctx context.Context
		err error
	}{
		{context.Background(), context.DeadlineExceeded}, // a deadline of the store's own
		{stopped, context.Canceled},
		{expired, errors.New("refused")},
	} {
		if got := unanswered(c.ctx, c.err); got != c.err {
			t.Errorf("unanswered(%v) = %v, want it unchanged", c.err, got)
		}
	}
}
