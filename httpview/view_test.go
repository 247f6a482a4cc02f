package httpview

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/electortest"
	"github.com/tenurehq/tenure/store/memory"
)

const key = "job"

// candidate is one elector with its view, running inside a synctest bubble.
type candidate struct {
	e      *tenure.Elector
	view   *Handler
	resign chan struct{} // closing it makes the current task return
}

// mustNew is [New], failing t on an error.
func mustNew(t testing.TB, opts Options) *Handler {
	t.Helper()
	h, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func newCandidate(t *testing.T, store tenure.Store, id string) *candidate {
	t.Helper()
	return newPublisher(t, store, id, "")
}

// newPublisher is newCandidate publishing value with its grants.
func newPublisher(t *testing.T, store tenure.Store, id, value string) *candidate {
	t.Helper()
	c := &candidate{resign: make(chan struct{})}
	cfg := tenure.Config{
		Store: store, Key: key, Identity: id, TTL: time.Second, Value: value,
		Logger: slog.New(slog.DiscardHandler),
		Rand:   rand.New(rand.NewPCG(1, uint64(len(id)))),
	}
	// Wired as a program would: the view first, its OnEvent in the
	// elector's config, then the elector.
	view := mustNew(t, Options{Key: key, Store: store, Logger: cfg.Logger})
	cfg.OnEvent = view.OnEvent(cfg.OnEvent)
	var err error
	if c.e, err = tenure.New(cfg); err != nil {
		t.Fatal(err)
	}
	if err := view.SetElector(c.e); err != nil {
		t.Fatal(err)
	}
	c.view = view
	ctx := electortest.Run(t, c.e, electortest.TaskUntil(c.resign))
	go func() { _ = view.Run(ctx) }()
	return c
}

func get(t *testing.T, h http.Handler, target, accept string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func leaderOf(t *testing.T, h http.Handler) Leader {
	t.Helper()
	w := get(t, h, "/", "application/json")
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET / = %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	var l Leader
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil {
		t.Fatalf("GET /: %v in %s", err, w.Body)
	}
	return l
}

func TestViewFollowsLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		a := newCandidate(t, store.Handle(), "a")
		synctest.Wait() // a is elected: nobody else campaigns yet
		b := newCandidate(t, store.Handle(), "b")
		synctest.Wait()

		la, lb := leaderOf(t, a.view), leaderOf(t, b.view)
		if la.Name != "a" || !la.IsSelf || la.Term != 1 || la.RenewTime == nil || la.LeaseDuration != 1 || la.Since == nil {
			t.Errorf("a's view = %+v, want a leading itself in term 1 with a renew time and a 1s lease", la)
		}
		if lb.Name != "a" || lb.IsSelf || lb.RenewTime != nil || lb.Identity != "b" {
			t.Errorf("b's view = %+v, want a leading, not self, no renew time", lb)
		}
		if got := strings.Join(lb.Candidates, ","); got != "a,b" {
			t.Errorf("b's candidates = %s, want a,b", got)
		}

		for _, p := range []struct {
			h      http.Handler
			target string
			want   int
		}{
			{a.view, "/healthz", 200}, {b.view, "/healthz", 200},
			{a.view, "/readyz", 200}, {b.view, "/readyz", 503},
			{a.view, "/readyz?standbyok", 200}, {b.view, "/readyz?standbyok", 200},
			{a.view, "/metrics", 404}, {a.view, "/nope", 404},
		} {
			if w := get(t, p.h, p.target, ""); w.Code != p.want {
				t.Errorf("GET %s = %d %s, want %d", p.target, w.Code, w.Body, p.want)
			}
		}

		close(a.resign) // a's task returns: a releases, b takes over
		synctest.Wait()
		la, lb = leaderOf(t, a.view), leaderOf(t, b.view)
		for _, l := range []Leader{la, lb} {
			if l.Name != "b" || l.Term != 2 || l.Transitions != 1 {
				t.Errorf("%s's view = %+v, want b leading term 2 after 1 transition", l.Identity, l)
			}
		}
		if !lb.IsSelf || la.IsSelf {
			t.Errorf("is_self: a %v, b %v; want false, true", la.IsSelf, lb.IsSelf)
		}
		var names []string
		for _, c := range lb.History {
			names = append(names, c.Name+"@"+string(rune('0'+c.Term)))
		}
		if got := strings.Join(names, " "); got != "a@1 @1 b@2" {
			t.Errorf("b's history = %s, want a@1 @1 b@2", got)
		}
		if w := get(t, a.view, "/readyz", ""); w.Code != 503 {
			t.Errorf("a's /readyz after stepping down = %d, want 503", w.Code)
		}
	})
}

func TestViewShowsPublishedValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		a := newPublisher(t, store.Handle(), "a", "10.0.0.7:8080")
		synctest.Wait()
		b := newPublisher(t, store.Handle(), "b", "10.0.0.8:8080")
		synctest.Wait()
		// An observer only: it learns the value from the store's records.
		obs := mustNew(t, Options{Key: key, Store: store.Handle()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = obs.Run(ctx) }()
		defer func() { cancel(); <-done }()
		synctest.Wait()
		for name, h := range map[string]*Handler{"a": a.view, "b": b.view, "observer": obs} {
			if l := leaderOf(t, h); l.Name != "a" || l.Value != "10.0.0.7:8080" {
				t.Errorf("%s's view = %+v, want a leading with value 10.0.0.7:8080", name, l)
			}
		}
		w := get(t, obs, "/", "application/json")
		if !strings.Contains(w.Body.String(), `"value":"10.0.0.7:8080"`) {
			t.Errorf("GET / = %s, want \"value\":\"10.0.0.7:8080\"", w.Body)
		}

		close(a.resign) // a releases, b takes over with its own value
		synctest.Wait()
		for name, h := range map[string]*Handler{"a": a.view, "b": b.view, "observer": obs} {
			if l := leaderOf(t, h); l.Name != "b" || l.Value != "10.0.0.8:8080" {
				t.Errorf("%s's view after the handover = %+v, want b leading with value 10.0.0.8:8080", name, l)
			}
		}
	})
}

// TestViewBoundsWhatTheStoreWrites: records written into the store from
// outside with a new holder of 16 KiB each term, and a value as long,
// cannot make the view grow without bound: the view kept every holder it
// had seen leading as a candidate, for as long as it ran, and served all of
// them, whole, in every GET / and every /events event (5 MB each here; a
// few hundred holders of some MB each would take gigabytes). A holder or
// value longer than tenure ever grants is cut, with its size, as `tenure
// status` cuts it, and the candidates are those of the timeline kept.
func TestViewBoundsWhatTheStoreWrites(t *testing.T) {
	view := mustNew(t, Options{Key: key, Store: memory.New(nil), Logger: slog.New(slog.DiscardHandler)})
	big := strings.Repeat("é", 8<<10) // 16 KiB
	const n = 200
	for i := range n {
		view.Observe(tenure.Record{Key: key, Holder: fmt.Sprintf("%03d%s", i, big), Term: uint64(i + 1), Value: big})
	}
	w := get(t, view, "/", "application/json")
	if w.Body.Len() > 256<<10 {
		t.Fatalf("GET / after %d holders of 16 KiB is %d bytes", n, w.Body.Len())
	}
	l := leaderOf(t, view)
	if len(l.Candidates) > 100 || len(l.History) > 100 {
		t.Errorf("the view lists %d candidates and %d changes; want at most the 100 changes of its timeline", len(l.Candidates), len(l.History))
	}
	last := fmt.Sprintf("%03d", n-1)
	for _, f := range []struct {
		what, s, size string
		max           int
	}{{"name", l.Name, "16387", tenure.MaxIdentityLen}, {"value", l.Value, "16384", tenure.MaxValueLen}} {
		if !utf8.ValidString(f.s) || len(f.s) > f.max+20 || !strings.HasSuffix(f.s, "... ("+f.size+" bytes)") {
			t.Errorf("%s is %d bytes: %.40q; want at most %d bytes of valid UTF-8 and its size, %s bytes", f.what, len(f.s), f.s, f.max, f.size)
		}
	}
	if !strings.HasPrefix(l.Name, last) {
		t.Errorf("name = %.40q; want the last holder, %s...", l.Name, last)
	}
}

func TestPageIsServedToBrowsers(t *testing.T) {
	h := mustNew(t, Options{Key: key, Store: memory.New(nil)})
	w := get(t, h, "/", "text/html,application/xhtml+xml;q=0.9")
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || !strings.Contains(w.Body.String(), `new EventSource("events")`) {
		t.Fatalf("GET / as a browser = %q, %.80s", w.Header().Get("Content-Type"), w.Body)
	}
	for _, remote := range []string{"http://", "https://", "//cdn"} {
		if strings.Contains(w.Body.String(), "src=\""+remote) || strings.Contains(w.Body.String(), "href=\""+remote) {
			t.Errorf("the page loads something from elsewhere (%s)", remote)
		}
	}
	if l := leaderOf(t, h); l.Name != "" || l.Since != nil || l.Key != key || l.History == nil {
		t.Errorf("view of a never-granted key = %+v", l)
	}
	if w := get(t, h, "/", ""); !strings.HasPrefix(w.Body.String(), `{"name":""`) {
		t.Errorf("GET / without Accept = %.60s, want the JSON view", w.Body)
	}
}

// TestPageHeaders: the page carries a Content-Security-Policy that lets
// only its own inline style and script run (by hash: one of each, no
// inline event handlers) and requests go only to this server, and may not
// be framed; the page and the JSON view are never sniffed as another type.
// A holder or value written into the store from outside is shown as text,
// and this is the second line should it ever reach markup.
func TestPageHeaders(t *testing.T) {
	h := mustNew(t, Options{Key: key, Store: memory.New(nil)})
	w := get(t, h, "/", "text/html")
	page := w.Body.String()
	csp := w.Header().Get("Content-Security-Policy")
	hash := func(tag string) string {
		m := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(page, -1)
		if len(m) != 1 {
			t.Fatalf("the page has %d <%s> elements, want 1: the policy allows one by hash", len(m), tag)
		}
		sum := sha256.Sum256([]byte(m[0][1]))
		return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	}
	for _, want := range []string{"default-src 'none'", "script-src " + hash("script") + ";", "style-src " + hash("style") + ";",
		"connect-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("Content-Security-Policy %q allows unsafe sources", csp)
	}
	if m := regexp.MustCompile(`<[^>]*\son[a-z]+=`).FindString(page); m != "" {
		t.Errorf("the page has an inline event handler, which the policy blocks: %s", m)
	}
	for _, accept := range []string{"text/html", ""} {
		if got := get(t, h, "/", accept).Header().Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET / (Accept %q): X-Content-Type-Options %q, want nosniff", accept, got)
		}
	}
}

// failingReader is a store whose reads fail with an error naming its URL.
type failingReader struct{}

func (failingReader) Get(context.Context, string) (tenure.Record, error) {
	return tenure.Record{}, errors.New("dial redis://admin:hunter2@db.internal:6379: connection refused")
}

func (failingReader) Watch(context.Context, string) (<-chan tenure.Record, error) {
	return nil, errors.New("no watch")
}

func TestObserverHealthNeverShowsTheStore(t *testing.T) {
	h := mustNew(t, Options{Key: key, Store: failingReader{}, Logger: slog.New(slog.DiscardHandler)})
	for _, target := range []string{"/healthz", "/readyz?standbyok"} {
		w := get(t, h, target, "")
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("GET %s with an unreadable store = %d, want 503", target, w.Code)
		}
		if s := w.Body.String(); strings.Contains(s, "hunter2") || strings.Contains(s, "db.internal") {
			t.Errorf("GET %s shows the store: %s", target, s)
		}
	}
	ok, _ := New(Options{Key: key, Store: memory.New(nil)})
	if w := get(t, ok, "/healthz", ""); w.Code != 200 {
		t.Errorf("observer /healthz with a readable store = %d", w.Code)
	}
	if w := get(t, ok, "/readyz", ""); w.Code != 503 {
		t.Errorf("observer /readyz without standbyok = %d, want 503: an observer never leads", w.Code)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, o := range map[string]Options{
		"no key":   {Store: memory.New(nil)},
		"no store": {Key: key},
	} {
		if _, err := New(o); !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
	e, _ := tenure.New(tenure.Config{Store: memory.New(nil), Key: "other", Identity: "a"})
	if _, err := New(Options{Key: key, Store: memory.New(nil), Elector: e}); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("elector of another key: New = %v, want ErrInvalid", err)
	}
}
