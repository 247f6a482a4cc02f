package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// countingReader counts the watches opened on a store.
type countingReader struct {
	tenure.Reader
	watches atomic.Int64
}

func (c *countingReader) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	c.watches.Add(1)
	return c.Reader.Watch(ctx, key)
}

// TestViewServerWatchesOnce: --http's view and metrics are fed by one
// observer, on tenure run (serve) and on tenure watch (follow, whose
// caller prints the same records): the key is watched once.
func TestViewServerWatchesOnce(t *testing.T) {
	for _, mode := range []string{"run", "watch"} {
		t.Run(mode, func(t *testing.T) {
			st := memory.New(nil)
			defer st.Close()
			reader := &countingReader{Reader: st}
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			v, err := listenView("127.0.0.1:0", "once", reader, logger)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var printed <-chan tenure.Record
			if mode == "run" {
				v.serve(ctx, logger)
			} else {
				v.start(ctx, logger)
				obs := &tenure.Observer{Store: reader, Key: "once", Logger: logger}
				printed = v.follow(ctx, obs.Changes(ctx))
			}
			l, err := st.Acquire(ctx, "once", "a", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if printed != nil {
				waitRecord(t, printed, "a")
			}
			waitFor(t, func() bool {
				return v.view.Current().Name == "a" && strings.Contains(scrapeView(v), `tenure_term{key="once"} `+strconv.FormatUint(l.Term, 10))
			})
			if n := reader.watches.Load(); n != 1 {
				t.Fatalf("%d watches of the key, want 1 feeding both the view and the metrics", n)
			}
		})
	}
}

// waitRecord receives records until one has holder.
func waitRecord(t *testing.T, ch <-chan tenure.Record, holder string) {
	t.Helper()
	for {
		select {
		case r, ok := <-ch:
			if !ok {
				t.Fatal("the records ended")
			}
			if r.Holder == holder {
				return
			}
		case <-time.After(wait):
			t.Fatalf("no record with holder %q within %s", holder, wait)
		}
	}
}

func scrapeView(v *viewServer) string {
	rec := httptest.NewRecorder()
	v.view.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// TestLoopbackViewRefusesOtherHosts: a request that reaches the view
// through a loopback address is answered if its Host is an IP address or
// localhost, and refused (421) if it names another host, which is how a
// DNS-rebinding page in a browser on this machine would reach it: whether
// the view listens on a loopback address or on every interface (the
// README's --http :8080, which a rebinding page reaches through 127.0.0.1
// as well). A request to one of the machine's other addresses is
// answered whatever the Host (a pod IP, a service name, an ingress host).
func TestLoopbackViewRefusesOtherHosts(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	logger := slog.New(slog.DiscardHandler)
	other := nonLoopbackIP(t)
	for _, tc := range []struct {
		addr string
		via  string // the address the request is sent to
		host string
		want int
	}{
		{"127.0.0.1:0", "127.0.0.1", "127.0.0.1:PORT", http.StatusOK},
		{"127.0.0.1:0", "127.0.0.1", "localhost:PORT", http.StatusOK},
		{"127.0.0.1:0", "127.0.0.1", "localhost", http.StatusOK},
		{"127.0.0.1:0", "127.0.0.1", "rebind.attacker.example:PORT", http.StatusMisdirectedRequest},
		{"127.0.0.1:0", "127.0.0.1", "localhost.attacker.example", http.StatusMisdirectedRequest},
		{"[::1]:0", "::1", "[::1]:PORT", http.StatusOK},
		{"[::1]:0", "::1", "rebind.attacker.example:PORT", http.StatusMisdirectedRequest},
		{":0", "127.0.0.1", "localhost:PORT", http.StatusOK},
		{":0", "127.0.0.1", "rebind.attacker.example:PORT", http.StatusMisdirectedRequest},
		{":0", "::1", "rebind.attacker.example:PORT", http.StatusMisdirectedRequest},
		{":0", other, "rebind.attacker.example:PORT", http.StatusOK},
	} {
		if tc.via == "" {
			t.Logf("%s: no address of this machine but loopback to send to", tc.addr)
			continue
		}
		v, err := listenView(tc.addr, "job", st, logger)
		if err != nil {
			if strings.HasPrefix(tc.addr, "[::1]") {
				t.Logf("%s: %v (no IPv6 loopback here)", tc.addr, err)
				continue
			}
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go v.serve(ctx, logger)
		_, port, _ := net.SplitHostPort(v.ln.Addr().String())
		req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort(tc.via, port)+"/", nil)
		req.Host = strings.ReplaceAll(tc.host, "PORT", port)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if tc.via == "::1" {
				t.Logf("%s via %s: %v (no IPv6 loopback here)", tc.addr, tc.via, err)
				cancel()
				continue
			}
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("view on %s, sent to %s, Host %s: %d, want %d", tc.addr, tc.via, req.Host, resp.StatusCode, tc.want)
		}
		cancel()
	}
}

// nonLoopbackIP returns an IPv4 address of this machine other than a
// loopback one, or "" if it has none.
func nonLoopbackIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Logf("interface addresses: %v", err)
		return ""
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	return ""
}

// TestLoopbackViewAnswersWithoutHost: an HTTP/1.0 request without a Host
// header (a load balancer's default health check, such as HAProxy's
// option httpchk, or a probe written with nc) through a loopback address
// is answered: no browser leaves out the Host, so such a request cannot
// come from a DNS-rebinding page. Only a Host that names another host is
// refused.
func TestLoopbackViewAnswersWithoutHost(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	logger := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		request string
		want    string
	}{
		{"GET /readyz?standbyok HTTP/1.0\r\n\r\n", "HTTP/1.0 200 "},
		{"OPTIONS / HTTP/1.0\r\n\r\n", "HTTP/1.0 200 "},
		{"GET /readyz?standbyok HTTP/1.0\r\nHost: rebind.attacker.example\r\n\r\n", "HTTP/1.0 421 "},
	} {
		v, err := listenView("127.0.0.1:0", "job", st, logger)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go v.serve(ctx, logger)
		c, err := net.Dial("tcp", v.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, tc.request); err != nil {
			t.Fatal(err)
		}
		resp, err := io.ReadAll(c) // HTTP/1.0: the server closes after the response
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := strings.Cut(string(resp), "\r\n"); !strings.HasPrefix(got, tc.want) {
			t.Errorf("%q to a view on 127.0.0.1: status line %q, want %q", tc.request, got, tc.want)
		}
		cancel()
	}
}

// TestHTTPViewSaysItsAddress: with --http :0 the kernel picks the port,
// and the log says which, even where only warnings are logged (tenure
// watch), so that an operator (or a script) can reach the view.
func TestHTTPViewSaysItsAddress(t *testing.T) {
	c, done := startLogged(t, nil, "watch", "--store", "file://"+t.TempDir(), "--key", "web", "--http", "127.0.0.1:0")
	_, addr, _ := strings.Cut(c.awaitLog(t, "serving the --http view"), "addr=")
	addr, _, _ = strings.Cut(addr, " ")
	if addr == "" || strings.HasSuffix(addr, ":0") {
		t.Fatalf("tenure watch --http 127.0.0.1:0 did not log the address it serves on (got %q)", addr)
	}
	if code, _ := get(t, "http://"+addr+"/healthz"); code != 200 {
		t.Fatalf("GET /healthz on the logged address %s: %d", addr, code)
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	waitDone(t, done, wait, "tenure watch")
}
