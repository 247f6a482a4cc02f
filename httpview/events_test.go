package httpview

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// stream is the client side of one /events request served in a goroutine.
type stream struct {
	cancel context.CancelFunc
	lines  *bufio.Scanner
	done   chan struct{}
}

func openEvents(t *testing.T, h http.Handler) *stream {
	t.Helper()
	return openEventsFrom(t, h, "192.0.2.1:1234")
}

// openEventsFrom is openEvents from the remote address remote.
func openEventsFrom(t *testing.T, h http.Handler, remote string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	s := &stream{cancel: cancel, lines: bufio.NewScanner(pr), done: make(chan struct{})}
	w := &pipeWriter{header: http.Header{}, w: pw}
	go func() {
		defer close(s.done)
		defer pw.Close()
		r := httptest.NewRequest(http.MethodGet, "/events", nil).WithContext(ctx)
		r.RemoteAddr = remote
		h.ServeHTTP(w, r)
	}()
	t.Cleanup(func() { cancel(); pr.Close(); <-s.done })
	return s
}

// next returns the next event's name and data.
func (s *stream) next(t *testing.T) (string, Leader) {
	t.Helper()
	var name string
	for s.lines.Scan() {
		line := s.lines.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var l Leader
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &l); err != nil {
				t.Fatalf("event data: %v", err)
			}
			return name, l
		}
	}
	t.Fatalf("stream ended: %v", s.lines.Err())
	return "", Leader{}
}

// pipeWriter is a flushable ResponseWriter writing into a pipe.
type pipeWriter struct {
	header http.Header
	w      io.Writer
}

func (p *pipeWriter) Header() http.Header         { return p.header }
func (p *pipeWriter) WriteHeader(int)             {}
func (p *pipeWriter) Write(b []byte) (int, error) { return p.w.Write(b) }
func (p *pipeWriter) Flush()                      {}

func TestEventsOnePerLeadershipChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		a := newCandidate(t, store.Handle(), "a")
		synctest.Wait()
		b := newCandidate(t, store.Handle(), "b")
		synctest.Wait()

		s := openEvents(t, b.view)
		if name, l := s.next(t); name != "leader" || l.Name != "a" {
			t.Fatalf("first event = %s %+v, want the current view with a leading", name, l)
		}
		close(a.resign)
		if _, l := s.next(t); l.Name != "" {
			t.Fatalf("event: leader %q (term %d), want none (a released)", l.Name, l.Term)
		}
		_, l := s.next(t)
		if l.Name == "b" && !l.IsSelf {
			// The store's watch showed b before b's elector said it leads:
			// is_self changes with the second event.
			_, l = s.next(t)
		}
		if l.Name != "b" || !l.IsSelf {
			t.Fatalf("event: %+v, want b elected, is_self", l)
		}
		// Renewals are not changes: an hour of b's leadership sends nothing.
		time.Sleep(time.Hour)
		synctest.Wait()
		b.view.Observe(tenure.Record{Key: key, Holder: "c", Term: 9, TTL: time.Second})
		if _, l := s.next(t); l.Name != "c" || l.Term != 9 {
			t.Fatalf("event after an hour = %+v, want only the next change (c, term 9)", l)
		}
	})
}

func TestSlowAndGoneClientsNeverBlockTheElector(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Options{Key: key, Store: memory.New(nil)})
		s := openEvents(t, h) // never read past the first event
		synctest.Wait()
		if n := h.clientCount(); n != 1 {
			t.Fatalf("%d clients, want 1", n)
		}
		onEvent := h.OnEvent(nil)
		for term := uint64(1); term <= 10*clientBuffer; term++ {
			// Returns although nobody reads: the test would hang otherwise.
			onEvent(tenure.Event{Kind: tenure.EventLeaderChanged, Key: key, Holder: "x", Term: term, Time: time.Now()})
		}
		synctest.Wait()
		if n := h.clientCount(); n != 0 {
			t.Errorf("%d clients after one fell far behind, want it dropped", n)
		}
		s.cancel()

		// A client that disconnects is forgotten at once.
		s2 := openEvents(t, h)
		s2.next(t)
		if n := h.clientCount(); n != 1 {
			t.Fatalf("%d clients, want 1", n)
		}
		s2.cancel()
		synctest.Wait()
		if n := h.clientCount(); n != 0 {
			t.Errorf("%d clients after the only one disconnected, want 0", n)
		}
	})
}

// When Run's context ends, open streams end too, so a server's Shutdown
// does not wait for browsers.
func TestRunEndsStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := mustNew(t, Options{Key: key, Store: memory.New(nil)})
		ctx, cancel := context.WithCancel(context.Background())
		ran := make(chan error)
		go func() { ran <- h.Run(ctx) }()
		s := openEvents(t, h)
		s.next(t)
		cancel()
		if err := <-ran; err != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		<-s.done // the handler returned although the client is still there
	})
}

// TestEventsDropsAClientThatStopsReading: an /events stream whose client
// stops reading ends once a write has waited writeTimeout. Without the
// write deadline, its handler stayed blocked in the write, holding a
// goroutine and the connection, for as long as the server ran.
func TestEventsDropsAClientThatStopsReading(t *testing.T) {
	old := writeTimeout
	writeTimeout = 100 * time.Millisecond
	t.Cleanup(func() { writeTimeout = old })
	h, err := New(Options{Key: "k", Store: memory.New(nil).Handle()})
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{}) // the handler returned: its connection went idle or closed
	var once sync.Once
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateIdle || s == http.StateClosed {
			once.Do(func() { close(ended) })
		}
	}
	srv.Start()
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	if _, err := fmt.Fprint(conn, "GET /events HTTP/1.1\r\nHost: view\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	for h.clientCount() == 0 { // the stream is open once it subscribed
		runtime.Gosched()
	}
	// Leadership changes, each with a value of 256 KiB, until the stream
	// has fallen behind and was dropped: more than the sockets' buffers
	// hold is then written or queued for it, so its writer is blocked.
	value := strings.Repeat("v", 256<<10)
	for term := uint64(1); h.clientCount() > 0; term++ {
		if term > 1e5 {
			t.Fatal("the stream never fell behind")
		}
		h.Observe(tenure.Record{Key: "k", Holder: fmt.Sprint("c", term%2), Term: term, TTL: time.Second, Value: value})
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream of a client that stopped reading was still being written 10s after it was dropped")
	}
}

// TestEventsBoundsTheStreams: with MaxStreams streams open, one more
// /events request gets a stream, and the oldest stream ends, so the count
// stays at MaxStreams.
func TestEventsBoundsTheStreams(t *testing.T) {
	h, err := New(Options{Key: "k", Store: memory.New(nil).Handle(), MaxStreams: 2})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	open := func() *http.Response {
		t.Helper()
		resp, err := http.Get(srv.URL + "/events")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("a stream: %d, want 200", resp.StatusCode)
		}
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil { // subscribed
			t.Fatalf("a stream's first line: %v", err)
		}
		return resp
	}
	a, b := open(), open()
	defer a.Body.Close()
	defer b.Body.Close()
	c := open()
	defer c.Body.Close()
	if _, err := io.ReadAll(a.Body); err != nil { // ends when the server ends it
		t.Fatalf("the oldest stream, ended for a third: %v", err)
	}
	if n := h.clientCount(); n != 2 {
		t.Fatalf("%d streams open, want MaxStreams (2)", n)
	}
	if _, err := New(Options{Key: "k", Store: memory.New(nil).Handle(), MaxStreams: -1}); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("MaxStreams -1: %v, want ErrInvalid", err)
	}
}

// TestEventsOneHostCannotKeepAnotherOut: streams from one remote address,
// however many it opens, never keep another address's stream out, and a
// flood from one address ends its own streams, not another's.
func TestEventsOneHostCannotKeepAnotherOut(t *testing.T) {
	h, err := New(Options{Key: "k", Store: memory.New(nil).Handle(), MaxStreams: 2})
	if err != nil {
		t.Fatal(err)
	}
	first := openEventsFrom(t, h, "198.51.100.7:1000")
	first.next(t)
	openEventsFrom(t, h, "198.51.100.7:1001").next(t)
	other := openEventsFrom(t, h, "203.0.113.9:1000") // every slot held by 198.51.100.7
	other.next(t)
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the oldest stream of the address holding every slot did not end for another address's")
	}
	for i := range 5 {
		openEventsFrom(t, h, fmt.Sprintf("198.51.100.7:%d", 2000+i)).next(t)
	}
	h.Observe(tenure.Record{Key: "k", Holder: "a", Term: 1, TTL: time.Second})
	if _, l := other.next(t); l.Name != "a" {
		t.Fatalf("the other address's stream got %+v, want leader a", l)
	}
	if n := h.clientCount(); n != 2 {
		t.Fatalf("%d streams open, want MaxStreams (2)", n)
	}
}

// TestEventsHEADHoldsNoStream: HEAD (and OPTIONS) /events answers the
// stream's headers and returns. HEAD used to open a stream whose writes
// went nowhere, so it never failed and held one of MaxStreams for as long
// as the client kept its connection.
func TestEventsHEADHoldsNoStream(t *testing.T) {
	h, err := New(Options{Key: "k", Store: memory.New(nil).Handle(), MaxStreams: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{http.MethodHead, http.MethodOptions} {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, httptest.NewRequest(m, "/events", nil).WithContext(ctx))
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s /events still served after 10s, %d stream(s) open", m, h.clientCount())
		}
		if w.Code != 200 || w.Header().Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s /events: %d, Content-Type %q; want 200, text/event-stream", m, w.Code, w.Header().Get("Content-Type"))
		}
	}
}

// TestViewIsReadOnly: a method other than GET, HEAD and OPTIONS gets 405
// with Allow on every route, where it used to get the view.
func TestViewIsReadOnly(t *testing.T) {
	h, err := New(Options{Key: "k", Store: memory.New(nil).Handle()})
	if err != nil {
		t.Fatal(err)
	}
	// Requests already ended, so that a stream (the old answer to any
	// method on /events) ends at once.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, "PATCH"} {
		for _, path := range []string{"/", "/healthz", "/readyz", "/events", "/candidates", "/metrics"} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(m, path, nil).WithContext(ended))
			if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD, OPTIONS" {
				t.Errorf("%s %s: %d, Allow %q; want 405, GET, HEAD, OPTIONS", m, path, w.Code, w.Header().Get("Allow"))
			}
		}
	}
	for _, m := range []string{http.MethodHead, http.MethodOptions} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(m, "/healthz", nil))
		if w.Code != 200 {
			t.Errorf("%s /healthz: %d, want 200", m, w.Code)
		}
	}
}
