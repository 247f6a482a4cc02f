package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/tenurehq/tenure/store/memory"
)

// TestViewProbeGetsThroughHeldConnections: anyone who reaches --http could
// take every one of its viewMaxConns connections and keep them: a request
// answered now and then on each (keep-alive), or a request line sent byte
// by byte. A liveness probe then waited in the kernel's accept queue
// until it timed out, and a kubelet restarted the leader. Connections
// that are not in the middle of serving a request give way, oldest
// first, to a new one.
func TestViewProbeGetsThroughHeldConnections(t *testing.T) {
	addr := serveTestView(t)
	// Streams being served stay: the oldest connections, yet never closed
	// to make room.
	var streams []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
			t.Fatal(err)
		}
		streams = append(streams, c)
	}
	for i := range viewMaxConns - len(streams) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i%2 == 1 {
			io.WriteString(c, "GET /readyz?standb") // and nothing more: still sending its request
			continue
		}
		io.WriteString(c, "GET /readyz?standbyok HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close() // kept alive, idle
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for i := range 3 {
		resp, err := client.Get("http://" + addr + "/healthz")
		if err != nil {
			t.Fatalf("probe %d behind %d held connections: %v", i, viewMaxConns, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("probe %d: %s", i, resp.Status)
		}
	}
	for i, c := range streams {
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := io.Copy(io.Discard, c); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("/events stream %d was closed (%v) to make room", i, err)
		}
	}
}

// TestViewProbeOutlastsAFloodFromElsewhere: a liveness probe has
// connected but not yet sent its request (its round trip under way) when
// more than viewMaxConns connections arrive from another address. The
// limiter used to close the oldest connection not being served, the
// probe's: a flood faster than a probe's round trip delayed it. Now a
// flood from one address closes its own connections.
func TestViewProbeOutlastsAFloodFromElsewhere(t *testing.T) {
	addr := serveTestView(t)
	// The probe comes from 127.0.0.2 (Linux answers all of 127/8 on lo).
	probe, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}).Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from 127.0.0.2: %v", err)
	}
	defer probe.Close()
	for range viewMaxConns {
		c, err := net.Dial("tcp", addr) // from 127.0.0.1, sending nothing
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	// One more, answered: the server has accepted every connection before
	// it, in order, the probe's first.
	last, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer last.Close()
	io.WriteString(last, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if _, err := http.ReadResponse(bufio.NewReader(last), nil); err != nil {
		t.Fatalf("the flood's last connection: %v", err)
	}
	probe.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(probe, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(probe), nil)
	if err != nil {
		t.Fatalf("the probe, connected before %d connections from another address: %v", viewMaxConns+1, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the probe: %s", resp.Status)
	}
}

// serveTestView serves the --http view of key job on a memory store at
// a loopback port until the test ends, and returns its address.
func serveTestView(t *testing.T) string {
	t.Helper()
	st := memory.New(nil)
	t.Cleanup(func() { st.Close() })
	logger := slog.New(slog.DiscardHandler)
	v, err := listenView("127.0.0.1:0", "job", st, logger)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v.serve(ctx, logger)
	return v.ln.Addr().String()
}
