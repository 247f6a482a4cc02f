package storetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// InvalidURLs checks that open refuses each of urls with an error matching
// [tenure.ErrInvalid] that does not contain secret (when secret is not
// empty). A store that open does return is closed, and the case fails.
// open is the store package's own Open, or [tenure.Open] to go through the
// URL registry.
func InvalidURLs(t *testing.T, secret string, open func(ctx context.Context, rawURL string) (tenure.Store, error), urls ...string) {
	t.Helper()
	for _, u := range urls {
		st, err := open(t.Context(), u)
		if err == nil {
			_ = st.Close()
			t.Errorf("Open(%s) succeeded", tenure.Redact(u))
			continue
		}
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("Open(%s): %v, want ErrInvalid", tenure.Redact(u), err)
		}
		if secret != "" && strings.Contains(err.Error(), secret) {
			t.Errorf("Open(%s): the error quotes the password: %v", tenure.Redact(u), err)
		}
	}
}

// Unresponsive returns the address (host:port) of a server that accepts
// connections and never answers, for checking that a store's calls end
// with their context. It and its connections are closed when t ends.
func Unresponsive(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
	)
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				c.Close()
			} else {
				conns = append(conns, c)
			}
			mu.Unlock()
		}
	}()
	return l.Addr().String()
}

// Await returns the first record on the watch channel ch for which want
// returns true, skipping the others. It fails t if ch is closed first or
// no such record arrives within the given time; what names the record
// awaited in the failure. want may itself fail t on a record that must not
// come.
func Await(t testing.TB, ch <-chan tenure.Record, within time.Duration, what string, want func(tenure.Record) bool) tenure.Record {
	t.Helper()
	timeout := time.NewTimer(within)
	defer timeout.Stop()
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatalf("watch closed while waiting for %s", what)
			}
			if want(r) {
				return r
			}
		case <-timeout.C:
			t.Fatalf("no watch delivery of %s within %s", what, within)
		}
	}
}

// WatchOnce runs one watch of key on st through its whole life, as a
// candidate's watch comes and goes round after round: it starts the watch,
// takes its first delivery, then cancels it and waits for its channel to
// close. The watch runs within 30 s (or less if t ends first).
func WatchOnce(t testing.TB, st tenure.Store, key string) {
	t.Helper()
	ctx, cancel := context.WithCancel(Context(t, 30*time.Second))
	defer cancel()
	ch, err := st.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	cancel()
	for range ch {
	}
}

// Unreachable checks st, opened on a server that is down, the way an
// operator reads its errors: Acquire fails with an error that contains
// where (the server's port, say) and not secret, and Watch fails without
// secret in its error.
func Unreachable(t *testing.T, st tenure.Store, where, secret string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := st.Acquire(ctx, "k", "alpha", time.Second)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), where) {
		t.Fatalf("Acquire with the server down: %v, want an error naming %s and not the password", err, where)
	}
	t.Logf("Acquire with the server down: %v", err)
	_, err = st.Watch(ctx, "k")
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("Watch with the server down: %v, want an error without the password", err)
	}
	t.Logf("Watch with the server down: %v", err)
}

// ServerDown checks the calls of a store on a server that is away. open
// opens the store, with secret as its password, on the server at hostport
// (the store is closed when t ends). On a port nobody listens on, the
// store's errors are as [Unreachable] says, naming the port. On a server
// that accepts connections and never answers ([Unresponsive]), a Get ends
// with its context, whether that has a deadline or is only cancelled, with
// an error matching the context's and not quoting secret.
func ServerDown(t *testing.T, secret string, open func(hostport string) tenure.Store) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().(*net.TCPAddr)
	l.Close()
	Unreachable(t, open(down.String()), fmt.Sprint(down.Port), secret)

	hole := open(Unresponsive(t))
	for _, cancelled := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		want := context.DeadlineExceeded
		if cancelled { // no deadline: cancellation alone must end the call
			cancel()
			ctx, cancel = context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, cancel)
			want = context.Canceled
		}
		_, err := hole.Get(ctx, "k")
		cancel()
		if !errors.Is(err, want) {
			t.Fatalf("Get against a server that never answers: %v, want %v", err, want)
		}
		if strings.Contains(err.Error(), secret) {
			t.Fatalf("Get against a server that never answers: the error quotes the password: %v", err)
		}
	}
}

// AwaitEnd checks that the next record on the watch channel ch, within the
// given time, shows grant l ended: no holder, l's term. what names the end
// awaited (a release, an expiry) in the failure.
func AwaitEnd(t testing.TB, ch <-chan tenure.Record, l tenure.Lease, within time.Duration, what string) {
	t.Helper()
	Await(t, ch, within, what, func(r tenure.Record) bool {
		if r.Held() || r.Term != l.Term {
			t.Fatalf("delivery after %s: %+v, want term %d free", what, r, l.Term)
		}
		return true
	})
}

// Outage acquires key on st for a minute as "alpha", watches it, and then
// calls down, which takes the server away (a stop, a crash). It checks
// that Get then fails and that the watch closes, so that callers re-read
// and watch again, and returns the grant for the caller to check once the
// server is back.
func Outage(t *testing.T, st tenure.Store, key string, down func() error) tenure.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l, err := st.Acquire(ctx, key, "alpha", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := st.Watch(t.Context(), key) // no deadline: it must close by itself
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Holder != "alpha" {
		t.Fatalf("first watch delivery %+v", r)
	}
	if err := down(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Get(ctx, key); err == nil {
		t.Fatal("Get succeeded with the server down")
	}
	for range ch { // the watch's connection is gone: it must say so by closing
	}
	return l
}
