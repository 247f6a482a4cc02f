package httpview

import (
	"encoding/json"
	"fmt"
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
// drops it for falling behind.
type client struct{ ch chan []byte }

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

// subscribe registers a client and returns it with the current view, so
// no change falls between the two, or returns nil if MaxStreams clients
// are registered.
func (h *Handler) subscribe() (*client, []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.clients) >= h.opts.MaxStreams {
		return nil, nil
	}
	c := &client{ch: make(chan []byte, clientBuffer)}
	h.clients[c] = struct{}{}
	data, _ := json.Marshal(h.leaderLocked())
	return c, termsafe.JSON(data)
}

func (h *Handler) unsubscribe(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.clients, c) // closed by broadcastLocked only
}

// clients returns how many /events streams are open.
func (h *Handler) clientCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// serveEvents streams Server-Sent Events: the current view at once, then
// one "leader" event per leadership change, each with the JSON view as
// data. It returns when the client goes away or falls behind. With
// MaxStreams streams open, it answers 503.
func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	c, data := h.subscribe()
	if c == nil {
		w.Header().Set("Retry-After", "10")
		http.Error(w, fmt.Sprintf("too many /events streams (%d) are open", h.opts.MaxStreams), http.StatusServiceUnavailable)
		return
	}
	defer h.unsubscribe(c)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
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
