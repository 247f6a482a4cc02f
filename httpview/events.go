package httpview

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/tenurehq/tenure/internal/termsafe"
)

// clientBuffer is how many events an /events client may fall behind
// before it is disconnected (it reconnects and gets the current view).
const clientBuffer = 16

// keepAlive is how often an idle /events stream sends a comment, so
// proxies do not close it.
const keepAlive = 30 * time.Second

// writeTimeout bounds each write of an /events stream: a client that
// stops reading (its socket buffers full) is dropped after it, rather than
// holding a goroutine and a connection for as long as the server runs.
// A variable for tests.
var writeTimeout = 10 * time.Second

// client is one /events stream. Its channel is closed when the publisher
// drops it for falling behind, or when a new stream takes its place (see
// subscribe).
type client struct {
	ch   chan []byte
	addr string // the remote host, without the port
	seq  uint64 // the order streams were opened in
}

// broadcastLocked hands data to every client without waiting: a client
// whose buffer is full is dropped. Called with h.mu held.
func (h *Handler) broadcastLocked(data []byte) {
	for c := range h.clients {
		select {
		case c.ch <- data:
		default:
			delete(h.clients, c)
			close(c.ch)
		}
	}
}

// subscribe registers a client of the remote host addr and returns it
// with the current view, so no change falls between the two. With
// MaxStreams clients registered, it first ends one (see evictLocked): a
// new stream always gets in.
func (h *Handler) subscribe(addr string) (*client, []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.clients) >= h.opts.MaxStreams {
		h.evictLocked(addr)
	}
	h.streams++
	c := &client{ch: make(chan []byte, clientBuffer), addr: addr, seq: h.streams}
	h.clients[c] = struct{}{}
	data, _ := json.Marshal(h.leaderLocked())
	return c, termsafe.JSON(data)
}

// evictLocked makes room for a stream from the remote host addr: it ends
// the oldest stream of the host holding the most streams, the new one
// counted, and on a tie addr's own, else the oldest stream of those tied.
// So a host takes a stream from another only while that one holds more
// than it would: streams from one host, however many it opens, never keep
// another's out, and the streams a flood ends are its own. The ended
// stream's client, an EventSource, reconnects and gets the current view.
// Called with h.mu held; O(MaxStreams).
func (h *Handler) evictLocked(addr string) {
	held := make(map[string]int, len(h.clients)+1)
	held[addr]++
	for c := range h.clients {
		held[c.addr]++
	}
	worse := func(c, than *client) bool { // c is the better victim
		switch n, m := held[c.addr], held[than.addr]; {
		case n != m:
			return n > m
		case c.addr != than.addr && (c.addr == addr || than.addr == addr):
			return c.addr == addr
		}
		return c.seq < than.seq
	}
	var victim *client
	for c := range h.clients {
		if victim == nil || worse(c, victim) {
			victim = c
		}
	}
	if victim != nil {
		delete(h.clients, victim)
		close(victim.ch)
	}
}

func (h *Handler) unsubscribe(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c) // if still there: closed by broadcastLocked, evictLocked and endStreams only
}

// clients returns how many /events streams are open.
func (h *Handler) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// serveEvents streams Server-Sent Events: the current view at once, then
// one "leader" event per leadership change, each with the JSON view as
// data. It returns when the client goes away or falls behind, or when a
// new stream takes its place (with MaxStreams streams open; see
// evictLocked).
func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	if r.Method == http.MethodHead || r.Method == http.MethodOptions {
		// HEAD's answer has no body to stream: it would hold a stream,
		// whose writes go nowhere and never fail, for as long as the
		// client kept the connection. OPTIONS asks for no stream.
		w.WriteHeader(http.StatusOK)
		return
	}
	rc := http.NewResponseController(w)
	c, data := h.subscribe(remoteHost(r))
	defer h.unsubscribe(c)
	w.WriteHeader(http.StatusOK)
	// write writes one message within writeTimeout, where the
	// ResponseWriter supports deadlines (http.Server's does).
	write := func(format string, args ...any) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(data []byte) bool { return write("event: leader\ndata: %s\n\n", data) }
	if !send(data) {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case data, ok := <-c.ch:
			if !ok || !send(data) {
				return
			}
		case <-tick.C:
			if !write(": keep-alive\n\n") {
				return
			}
		}
	}
}

// remoteHost is the host of r's remote address, the unit streams are
// shared by: the address a connection came from, never a header a client
// could set. Behind a proxy every stream has the proxy's.
func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
