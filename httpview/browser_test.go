package httpview

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/memory"
)

// browser starts headless Chromium for t and returns a context to drive
// it with chromedp, bounded by timeout.
func browser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		testserver.Missing(t, "chromium", "apt-get install chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.DisableGPU,
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[int](`1`)); err != nil { // start the browser
		t.Fatalf("starting %s: %v", path, err)
	}
	return ctx
}

// realCandidate is an elector on the system clock, with its view, whose
// task runs until resign is closed; started reports each term's start.
type realCandidate struct {
	view    *Handler
	resign  chan struct{}
	started chan struct{}
}

func startReal(t *testing.T, store tenure.Store, id string) *realCandidate {
	t.Helper()
	c := &realCandidate{resign: make(chan struct{}), started: make(chan struct{}, 1)}
	cfg := tenure.Config{Store: store, Key: key, Identity: id, TTL: 2 * time.Second,
		Logger: slog.New(slog.DiscardHandler)}
	view := mustNew(t, Options{Key: key, Store: store, Logger: cfg.Logger})
	cfg.OnEvent = view.OnEvent(nil)
	e, err := tenure.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := view.SetElector(e); err != nil {
		t.Fatal(err)
	}
	c.view = view
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = view.Run(ctx); done <- struct{}{} }()
	go func() {
		_ = e.Run(ctx, func(ctx context.Context) error {
			c.started <- struct{}{}
			select {
			case <-ctx.Done():
			case <-c.resign:
			}
			return nil
		})
		done <- struct{}{}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done })
	return c
}

// TestPageInBrowser loads the live page in headless Chromium, checks that
// it shows the leader, moves leadership and checks that the page redraws
// from /events alone, without a reload.
func TestPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	store := memory.New(nil)
	a := startReal(t, store.Handle(), "a")
	<-a.started // a leads before b campaigns
	b := startReal(t, store.Handle(), "b")
	srv := httptest.NewServer(b.view) // the follower's page
	t.Cleanup(srv.Close)
	ctx := browser(t, 60*time.Second) // closed before srv: its /events stream ends first

	text := func(id string) string { return `document.getElementById("` + id + `").textContent` }
	const bars = `document.querySelectorAll("#timeline rect.term").length`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.Poll[chromedp.Void](text("status")+` === "live" && `+text("leader")+` === "a"`),
	); err != nil {
		t.Fatalf("the page never showed a leading: %v", err)
	}
	// margin: the stylesheet's 2em of 15px, which the page's
	// Content-Security-Policy must let through, as it does the script
	// that made the page live.
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`({key: `+text("key")+`, bars: `+bars+
		`, margin: getComputedStyle(document.body).marginTop})`))
	if err != nil {
		t.Fatal(err)
	}
	before, _ := shown["bars"].(float64)
	if shown["key"] != key || before < 1 || shown["margin"] != "30px" {
		t.Fatalf("page shows %v, want key %q, at least 1 timeline bar and the stylesheet's 30px margin", shown, key)
	}

	close(a.resign) // a's task returns, a releases, b takes over
	<-b.started
	if err := chromedp.Do(ctx,
		chromedp.Poll[chromedp.Void](text("leader")+` === "b" && `+bars+` > `+strconv.Itoa(int(before))),
	); err != nil {
		t.Fatalf("the page did not redraw when leadership moved to b: %v", err)
	}
	shown, err = chromedp.Run(ctx, chromedp.Evaluate[map[string]any](
		`({leader: `+text("leader")+`, term: `+text("term")+`, self: `+text("self")+`, bars: `+bars+`})`))
	if err != nil {
		t.Fatal(err)
	}
	if shown["leader"] != "b" || shown["term"] != "2" || shown["self"] != "(this process)" || shown["bars"].(float64) <= before {
		t.Errorf("after the move the page shows %v (had %v bars), want b in term 2, this process, more bars", shown, before)
	}
	if out := os.Getenv("TENURE_SCREENSHOT_OUT"); out != "" { // the README's picture
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
		if err == nil {
			err = os.WriteFile(out, png, 0o644)
		}
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
	}
}

// TestPageReconnectsWhenItsStreamIsTaken: with MaxStreams streams open, a
// new /events stream ends the oldest one of its address; the page whose
// stream ended reconnects by itself, without a reload, and goes live
// again, its new stream ending the oldest one in turn.
func TestPageReconnectsWhenItsStreamIsTaken(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	store := memory.New(nil)
	a := startReal(t, store.Handle(), "a")
	<-a.started
	view := mustNew(t, Options{Key: key, Store: store.Handle(), MaxStreams: 1, Logger: slog.New(slog.DiscardHandler)})
	srv := serveView(t, view)
	bctx := browser(t, 60*time.Second)
	status := `document.getElementById("status").textContent`
	live := status + ` === "live" && document.getElementById("leader").textContent === "a"`
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/"), chromedp.Poll[chromedp.Void](live)); err != nil {
		t.Fatalf("the page never went live: %v", err)
	}
	taker, err := http.Get(srv.URL + "/events") // takes the page's one stream
	if err != nil || taker.StatusCode != 200 {
		t.Fatalf("a second stream: %v, %v", taker, err)
	}
	defer taker.Body.Close()
	if _, err := io.ReadAll(taker.Body); err != nil { // ended by the page's new stream
		t.Fatalf("reading the stream that took the page's: %v", err)
	}
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](live)); err != nil {
		t.Fatalf("the page did not go live again: %v", err)
	}
}

// serveView runs view and serves it until t ends.
func serveView(t *testing.T, view *Handler) *httptest.Server {
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = view.Run(ctx); close(ran) }()
	t.Cleanup(func() { cancel(); <-ran })
	srv := httptest.NewServer(view)
	t.Cleanup(srv.Close)
	return srv
}

// TestPageSaysWhyNoCandidates: the page of a derived key's view shows the
// reason /candidates gives (the base key to use), not a bare "not
// available".
func TestPageSaysWhyNoCandidates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	store := memory.New(nil)
	view := mustNew(t, Options{Key: "job~tenure-control", Store: store.Handle(), Logger: slog.New(slog.DiscardHandler)})
	srv := serveView(t, view)
	bctx := browser(t, 60*time.Second)
	registered := `document.getElementById("registered").textContent`
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.Poll[chromedp.Void](registered+` !== "…"`),
	); err != nil {
		t.Fatalf("the page never showed the registered candidates: %v", err)
	}
	shown, err := chromedp.Run(bctx, chromedp.Evaluate[string](registered))
	if err != nil {
		t.Fatal(err)
	}
	if want := `use key "job"`; !strings.Contains(shown, want) {
		t.Errorf("the page shows %q for the candidates of a derived key; want the reason, with %q", shown, want)
	}
}
