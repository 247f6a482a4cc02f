package main

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter bounds the connections of the --http server, like
// golang.org/x/net/netutil's LimitListener, but it never lets connections
// that hold no request in service keep a new one out: with max open, a new
// connection closes the oldest one that is idle between keep-alive
// requests or still sending its request. Anyone who reaches the port could
// otherwise hold every connection (a request every minute on each, or a
// request line sent a byte at a time), and a liveness probe would wait in
// the kernel's accept queue until it timed out. Only connections whose
// request a handler is serving stay: /events streams (bounded by
// httpview's MaxStreams) and requests being answered. A connection that
// arrives when all max are serving is closed at once. Install it with
// [connLimiter.install]; its methods are safe for concurrent use.
type connLimiter struct {
	net.Listener
	max int

	mu    sync.Mutex
	conns map[net.Conn]*connUse
}

// connUse is what the limiter knows of one open connection.
type connUse struct {
	since   time.Time // accepted, or last became idle
	serving bool      // a handler is serving its request
}

type connUseKey struct{}

func newConnLimiter(ln net.Listener, max int) *connLimiter {
	return &connLimiter{Listener: ln, max: max, conns: map[net.Conn]*connUse{}}
}

// install makes srv report to l: which connections are open, idle or
// being served. It wraps srv.Handler; call it before srv serves l.
func (l *connLimiter) install(srv *http.Server) {
	srv.ConnState = l.connState
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		l.mu.Lock()
		defer l.mu.Unlock()
		return context.WithValue(ctx, connUseKey{}, l.conns[c])
	}
	next := srv.Handler
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := r.Context().Value(connUseKey{}).(*connUse)
		l.setServing(u, true)
		defer l.setServing(u, false)
		next.ServeHTTP(w, r)
	})
}

func (l *connLimiter) setServing(u *connUse, on bool) {
	if u == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u.serving = on
}

// Accept implements [net.Listener]: it returns the next connection, after
// making room for it (see connLimiter).
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if len(l.conns) >= l.max {
			l.evictLocked()
		}
		if len(l.conns) >= l.max {
			l.mu.Unlock()
			c.Close() // every connection is serving a request
			continue
		}
		l.conns[c] = &connUse{since: time.Now()}
		l.mu.Unlock()
		return c, nil
	}
}

// evictLocked closes the oldest connection that no handler is serving.
// The caller holds l.mu.
func (l *connLimiter) evictLocked() {
	var oldest net.Conn
	var at time.Time
	for c, u := range l.conns {
		if !u.serving && (oldest == nil || u.since.Before(at)) {
			oldest, at = c, u.since
		}
	}
	if oldest != nil {
		oldest.Close()
		delete(l.conns, oldest)
	}
}

// connState is the server's [http.Server.ConnState].
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch s {
	case http.StateIdle:
		if u := l.conns[c]; u != nil {
			u.since, u.serving = time.Now(), false
		}
	case http.StateClosed, http.StateHijacked:
		delete(l.conns, c)
	}
}
