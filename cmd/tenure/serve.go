package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/httpview"
	"github.com/tenurehq/tenure/promtenure"
)

// Limits of the --http server. It runs inside the candidate's own
// process, and anyone who can reach ADDR can open connections to it: a
// broken dashboard, a port scanner, a hostile neighbour. Without a bound,
// a flood of idle connections takes every file descriptor the process
// may have, and the leader's next renewal, which opens a file (the local
// store) or a connection (the others), fails: the leader steps down. So
// the server holds at most viewMaxConns connections; when all are open, a
// new one closes the oldest that is idle or still sending its request of
// the remote address holding the most (see connLimiter), so held
// connections cannot keep a probe out, nor a flood from another address
// close its connection. It drops
// a keep-alive connection idle for viewIdleTimeout, and a request whose
// headers take longer than viewHeaderTimeout or exceed viewMaxHeaderBytes.
// Of those connections, /events streams, which last, may hold
// httpview.DefaultMaxStreams (a new one ends the oldest of the remote
// address holding the most); the rest stay for probes and scrapes. An
// /events stream that stops reading is dropped by package httpview's
// write deadline.
const (
	viewMaxConns       = 128
	viewHeaderTimeout  = 10 * time.Second
	viewIdleTimeout    = 2 * time.Minute
	viewMaxHeaderBytes = 64 << 10
)

// httpFlagUsage is the usage of --http, shared by run and watch.
const httpFlagUsage = "serve the leadership view on `ADDR` (such as :8080): GET / (JSON, or a live page in a browser), /healthz, /readyz, /events, /metrics"

// checkHTTPAddr rejects an --http address that cannot be listened on
// whatever the machine: not HOST:PORT or :PORT, or a port out of range or
// unknown. It is a bad command line (exit 2), found before the store is
// opened; a host that does not resolve or an address in use are found by
// the listen, at run time.
func checkHTTPAddr(addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		return usageErrorf("--http %q: %v; want HOST:PORT or :PORT, such as :8080", addr, err)
	}
	return nil
}

// viewServer is --http: the key's leadership view (package httpview), with
// Prometheus metrics (package promtenure) at /metrics, on one listener.
type viewServer struct {
	view    *httpview.Handler
	metrics *promtenure.Collector
	key     string
	store   tenure.Reader
	ln      net.Listener
	srv     *http.Server
	// kernelPort: --http asked for port 0, and the kernel chose one.
	kernelPort bool
}

// listenView listens on addr, so that an address in use fails the command
// before it campaigns, and prepares the view of key in store. Call serve
// to start answering.
func listenView(addr, key string, store tenure.Reader, logger *slog.Logger) (*viewServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	metrics := promtenure.New(key)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics, collectors.NewGoCollector(), newProcCollector())
	view, err := httpview.New(httpview.Options{
		Key: key, Store: store, Logger: logger,
		// Uncompressed: gzip tripled the CPU of a scrape of these ~12 KB
		// (2.5 ms against 0.8 ms, measured on the 2-core VM), and the idle
		// cost of --http is mostly scrapes.
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true}),
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	srv := &http.Server{Handler: loopbackHosts(view), ReadHeaderTimeout: viewHeaderTimeout, IdleTimeout: viewIdleTimeout,
		MaxHeaderBytes: viewMaxHeaderBytes}
	limited := newConnLimiter(ln, viewMaxConns)
	limited.install(srv)
	_, port, _ := net.SplitHostPort(addr)
	return &viewServer{view: view, metrics: metrics, key: key, store: store, ln: limited, srv: srv, kernelPort: port == "0"}, nil
}

// loopbackHosts serves a request that reached the view through a loopback
// address only if its Host is an IP address or localhost: a web page can
// point a name it controls at 127.0.0.1 (DNS rebinding) and have a
// browser on this machine read the view as its own origin; its requests
// carry that name. Such a request gets 421 Misdirected Request. It is the
// address the connection came in on that counts, not the one listened on:
// a view on every interface (--http :8080) is reached through 127.0.0.1
// too, while its requests through the machine's other addresses (by pod
// IP, service name or ingress host) are served whatever their Host. A
// request without a Host (HTTP/1.0: a load balancer's default health
// check) is served too: no browser leaves it out.
func loopbackHosts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && !a.IP.IsLoopback() {
			next.ServeHTTP(w, r)
			return
		}
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if r.Host != "" && host != "localhost" && net.ParseIP(strings.Trim(host, "[]")) == nil {
			http.Error(w, "tenure: through a loopback address this view answers only requests for an IP address or localhost", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// onEvent feeds an elector's events to the view and the metrics, then to
// next.
func (v *viewServer) onEvent(next func(tenure.Event)) func(tenure.Event) {
	return v.view.OnEvent(v.metrics.OnEvent(next))
}

// serve answers requests and follows the key with one [tenure.Observer],
// which feeds both the view and the metrics, until ctx is done; then it
// shuts the server down. It returns at once.
func (v *viewServer) serve(ctx context.Context, logger *slog.Logger) {
	v.start(ctx, logger)
	obs := &tenure.Observer{Store: v.store, Key: v.key, Logger: logger}
	go func() {
		for range v.follow(ctx, obs.Changes(ctx)) {
		}
	}()
}

// follow feeds each record from in, which must be closed when ctx is done
// (as [tenure.Observer.Changes] is), to the metrics and the view, then
// passes it on to the returned channel, closed when in is or ctx is done.
// So one observer serves the view, the metrics and the caller (tenure
// watch prints the records), and the key is watched once. The view and
// the metrics never wait; a caller slow to receive holds back the next
// record for all three.
func (v *viewServer) follow(ctx context.Context, in <-chan tenure.Record) <-chan tenure.Record {
	toView, out := make(chan tenure.Record), make(chan tenure.Record)
	go func() { _ = v.view.Follow(ctx, toView) }() // ends /events streams when ctx is done
	go func() {
		defer close(out)
		defer close(toView)
		for r := range in {
			v.metrics.Observe(r)
			select {
			case toView <- r:
			case <-ctx.Done():
				return
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// start logs the address it serves on and answers requests until ctx is
// done; then it shuts the server down. It returns at once. The view learns of the key only from
// [viewServer.follow] and the elector's events.
func (v *viewServer) start(ctx context.Context, logger *slog.Logger) {
	serveView(ctx, logger, v.srv, v.ln, v.kernelPort, "key", v.key)
}

// serveView logs the address ln is bound to, with the attributes who,
// serves srv on ln until ctx is done and then shuts srv down; it returns
// at once. With port 0 the kernel chose the address, and it is logged as
// a warning, whatever the log level (tenure watch logs warnings only):
// nothing else tells the operator where the view is.
func serveView(ctx context.Context, logger *slog.Logger, srv *http.Server, ln net.Listener, kernelPort bool, who ...any) {
	level := slog.LevelInfo
	if kernelPort {
		level = slog.LevelWarn
	}
	logger = logger.With(who...)
	logger.Log(ctx, level, "tenure: serving the --http view", "addr", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("tenure: the --http server stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
}
