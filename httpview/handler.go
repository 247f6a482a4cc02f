package httpview

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tenurehq/tenure/internal/termsafe"
)

//go:embed page.html
var pageFS embed.FS

// allowed is the Allow header of a 405: the methods the view answers.
const allowed = "GET, HEAD, OPTIONS"

// readTimeout bounds each store read of the view (see sharedRead).
const readTimeout = 2 * time.Second

// ServeHTTP serves the routes listed in the package doc. Paths are
// relative to where the handler is mounted; mount it under a prefix with
// [http.StripPrefix]. Every answer says X-Content-Type-Options: nosniff:
// the JSON and /events carry holders and values written into the store
// from outside, never to be taken for markup. The view is read-only: a
// method other than GET, HEAD or OPTIONS is answered 405. OPTIONS is
// answered as GET (HAProxy's option httpchk sends OPTIONS / by default),
// but at /events as HEAD.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		w.Header().Set("Allow", allowed)
		http.Error(w, "httpview: the view is read-only: it answers GET, HEAD and OPTIONS only", http.StatusMethodNotAllowed)
		return
	}
	switch strings.TrimSuffix(r.URL.Path, "/") {
	case "":
		h.serveRoot(w, r)
	case "/healthz":
		h.serveHealth(w, r)
	case "/readyz":
		h.serveReady(w, r)
	case "/events":
		h.serveEvents(w, r)
	case "/candidates":
		h.serveCandidates(w, r)
	case "/metrics":
		if h.opts.Metrics == nil {
			http.NotFound(w, r)
			return
		}
		h.opts.Metrics.ServeHTTP(w, r)
	default:
		http.NotFound(w, r)
	}
}

// serveRoot serves the page to browsers (Accept: text/html) and the JSON
// view to everyone else, so clients that send no Accept header get JSON.
func (h *Handler) serveRoot(w http.ResponseWriter, r *http.Request) {
	w.Header().Add("Vary", "Accept")
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		page, _ := pageFS.ReadFile("page.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("Content-Security-Policy", pageCSP)
		w.Header().Set("Referrer-Policy", "no-referrer")
		_, _ = w.Write(page)
		return
	}
	writeJSON(w, http.StatusOK, h.Current())
}

// pageCSP is the page's Content-Security-Policy: its own inline style and
// script, by hash, and requests to this server; no other script, frame,
// form or base. The page writes every string it shows with textContent, so
// a holder or value written into the store from outside is text; this
// policy is the second line, should one ever reach markup.
var pageCSP = func() string {
	page, _ := pageFS.ReadFile("page.html")
	return "default-src 'none'; script-src " + inlineHash(page, "script") + "; style-src " + inlineHash(page, "style") +
		"; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// inlineHash is the CSP source of the content of page's first <tag>
// element: 'sha256-' and the base64 of its SHA-256.
func inlineHash(page []byte, tag string) string {
	_, rest, _ := bytes.Cut(page, []byte("<"+tag+">"))
	body, _, _ := bytes.Cut(rest, []byte("</"+tag+">"))
	sum := sha256.Sum256(body)
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// health is the body of /healthz and /readyz.
type health struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	Key    string `json:"key"`
	Leader bool   `json:"leader"`
}

// healthy is the liveness check: the elector's, or for an observer a
// store read, shared by the checks within readFresh of it (see
// sharedRead). The store's error is not shown: it may name the store.
func (h *Handler) healthy(ctx context.Context) error {
	if e := h.candidate(); e != nil {
		return e.Healthy()
	}
	_, err := h.health.get(ctx, h.clock, func(ctx context.Context) (struct{}, error) {
		_, err := h.opts.Store.Get(ctx, h.opts.Key)
		return struct{}{}, err
	})
	if err != nil {
		h.logger.Debug("httpview: health check cannot read the key", "key", h.opts.Key)
		return fmt.Errorf("httpview: cannot read key %q from the store", h.opts.Key)
	}
	return nil
}

func (h *Handler) leading() bool {
	e := h.candidate()
	return e != nil && e.Status().Leading
}

func (h *Handler) serveHealth(w http.ResponseWriter, r *http.Request) {
	body := health{OK: true, Key: h.opts.Key, Leader: h.leading()}
	code := http.StatusOK
	if err := h.healthy(r.Context()); err != nil {
		body.OK, body.Error, code = false, err.Error(), http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

// serveReady answers 200 on a healthy leader, 503 elsewhere; with
// ?standbyok a healthy follower or observer answers 200 too.
func (h *Handler) serveReady(w http.ResponseWriter, r *http.Request) {
	body := health{OK: true, Key: h.opts.Key, Leader: h.leading()}
	_, standbyOK := r.URL.Query()["standbyok"]
	code := http.StatusOK
	switch err := h.healthy(r.Context()); {
	case err != nil:
		body.OK, body.Error, code = false, err.Error(), http.StatusServiceUnavailable
	case !body.Leader && !standbyOK:
		body.OK, body.Error, code = false, "not the leader (add ?standbyok to accept followers)", http.StatusServiceUnavailable
	}
	writeJSON(w, code, body)
}

// writeJSON answers code with v as JSON, the runes a terminal must not get
// raw escaped (see termsafe.JSON): an operator may read it with curl.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(termsafe.Writer{W: w}).Encode(v)
}
