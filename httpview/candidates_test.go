package httpview

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

func TestCandidatesRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		elected := make(chan struct{}, 1)
		for _, c := range []struct {
			id string
			p  int
		}{{"lead", 2}, {"standby", 0}} {
			e, err := tenure.New(tenure.Config{Store: store, Key: key, Identity: c.id, TTL: time.Second,
				Logger: slog.New(slog.DiscardHandler), Control: &tenure.Control{Priority: c.p}})
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				_ = e.Run(ctx, func(ctx context.Context) error { elected <- struct{}{}; <-ctx.Done(); return nil })
				done <- struct{}{}
			}()
		}
		defer func() { cancel(); <-done; <-done }()
		view := mustNew(t, Options{Key: key, Store: store, Logger: slog.New(slog.DiscardHandler)})
		go func() { _ = view.Run(ctx) }()
		<-elected
		time.Sleep(time.Second)
		rec := httptest.NewRecorder()
		view.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/candidates", nil))
		var body candidatesJSON
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("GET /candidates: %d %s (%v)", rec.Code, rec.Body, err)
		}
		cs := body.Candidates
		if len(cs) != 2 || cs[0].ID != "lead" || !cs[0].Leading || cs[1].ID != "standby" || cs[1].Priority != 0 || cs[1].Leading {
			t.Fatalf("GET /candidates = %+v; want lead (leading, priority 2), then standby (priority 0)", cs)
		}
	})
}

// TestPageShowsRegisteredCandidates: the live page lists the candidates
// registered with leadership control, from /candidates.
func TestPageShowsRegisteredCandidates(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	store := memory.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 3)
	view := mustNew(t, Options{Key: key, Store: store, Logger: slog.New(slog.DiscardHandler)})
	go func() { _ = view.Run(ctx); done <- struct{}{} }()
	for _, c := range []struct {
		id string
		p  int
	}{{"lead", 2}, {"standby", 0}} {
		e, err := tenure.New(tenure.Config{Store: store, Key: key, Identity: c.id, TTL: 2 * time.Second,
			Logger: slog.New(slog.DiscardHandler), Control: &tenure.Control{Priority: c.p}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_ = e.Run(ctx, func(ctx context.Context) error { <-ctx.Done(); return nil })
			done <- struct{}{}
		}()
	}
	t.Cleanup(func() { cancel(); <-done; <-done; <-done })
	srv := httptest.NewServer(view)
	t.Cleanup(srv.Close)
	bctx := browser(t, 60*time.Second)
	const want = "lead (priority 2, leading), standby (priority 0)"
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.Poll[chromedp.Void](`document.getElementById("registered").textContent === "`+want+`"`),
	); err != nil {
		t.Fatalf("the page never listed %q: %v", want, err)
	}
}

// noReads is a Reader that fails the test if read.
type noReads struct{ t *testing.T }

func (r noReads) Get(_ context.Context, key string) (tenure.Record, error) {
	r.t.Errorf("the view read %q", key)
	return tenure.Record{Key: key}, nil
}

func (r noReads) Watch(_ context.Context, key string) (<-chan tenure.Record, error) {
	r.t.Errorf("the view watched %q", key)
	return nil, context.Canceled
}

// TestCandidatesOfDerivedKey: a view of a key kept beside another key (its
// control key, preference key or a candidate slot) is made, since its own
// record is a fair thing to show, but its /candidates answers 400 naming
// the base key, without reading the store. Before, it read the derived
// key's own candidate slots, which nobody writes, and answered 200 with no
// candidates.
func TestCandidatesOfDerivedKey(t *testing.T) {
	for _, tc := range []struct{ key, what string }{
		{"job~tenure-control", "the control key"},
		{"job~tenure-prefer", "the preference key"},
		{"job~tenure-candidate-03", "candidate slot 03"},
	} {
		view := mustNew(t, Options{Key: tc.key, Store: noReads{t}, Logger: slog.New(slog.DiscardHandler)})
		rec := httptest.NewRecorder()
		view.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/candidates", nil))
		var body candidatesJSON
		want := `key "` + tc.key + `" is ` + tc.what + ` of "job", not a lease with candidates: use key "job"`
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != http.StatusBadRequest ||
			body.Key != tc.key || body.Candidates == nil || len(body.Candidates) != 0 || body.Error != want {
			t.Errorf("GET /candidates of %q: %d %s (%v); want 400 with error %q", tc.key, rec.Code, rec.Body, err, want)
		}
	}
}
