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
// connection closes one that is idle between keep-alive requests or still
// sending its request: the oldest such connection of the remote address
// (IP) that holds the most connections, the new one counted and, on a
// tie, preferred. So a flood from one address closes its own connections,
// never another address's, however fast it comes: a liveness probe from
// elsewhere that has connected but not yet sent its request is not closed
// by a flood of more than max connections within its round trip (all
// from one address, as through a proxy, it is the oldest connection that
// goes). Anyone who reaches the port could
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
	host    string    // the remote address, without the port
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
		host := remoteIP(c)
		l.mu.Lock()
		if len(l.conns) >= l.max {
			l.evictLocked(host)
		}
		if len(l.conns) >= l.max {
			l.mu.Unlock()
			c.Close() // every connection is serving a request
			continue
		}
		l.conns[c] = &connUse{since: time.Now(), host: host}
		l.mu.Unlock()
		return c, nil
	}
}

// evictLocked makes room for a connection from host: it closes the
// oldest connection no handler is serving of the address holding the most
// connections, host's new one counted, host's own on a tie (see
// connLimiter). The caller holds l.mu. O(max).
func (l *connLimiter) evictLocked(host string) {
	held := make(map[string]int, len(l.conns)+1)
	held[host]++
	for _, u := range l.conns {
		held[u.host]++
	}
	better := func(u, than *connUse) bool { // u is the better one to close
		switch n, m := held[u.host], held[than.host]; {
		case n != m:
			return n > m
		case u.host != than.host && (u.host == host || than.host == host):
			return u.host == host
		}
		return u.since.Before(than.since)
	}
	var victim net.Conn
	for c, u := range l.conns {
		if !u.serving && (victim == nil || better(u, l.conns[victim])) {
			victim = c
		}
	}
	if victim != nil {
		victim.Close()
		delete(l.conns, victim)
	}
}

// remoteIP is the IP address c comes from, or its whole remote address
// if that has no port.
func remoteIP(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
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
