package httpview

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/tenurehq/tenure/store/memory"
)

// TestEveryRouteSetsTypeAndNosniff: every answer carries a Content-Type
// and X-Content-Type-Options: nosniff, not only the page. The JSON routes
// and /events carry a holder and value written into the store from
// outside (<script> in an --advertise value), which a browser that sniffs
// could take for markup; only GET / said nosniff before.
func TestEveryRouteSetsTypeAndNosniff(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte("up 1\n"))
	})
	srv := serveView(t, mustNew(t, Options{Key: key, Store: memory.New(nil), Metrics: metrics}))
	for _, target := range []string{"/", "/healthz", "/readyz", "/readyz?standbyok", "/candidates", "/events", "/metrics", "/nowhere"} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+target, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("GET %s: %v", target, err)
		}
		if ct := resp.Header.Get("Content-Type"); ct == "" || !strings.Contains(ct, "/") {
			t.Errorf("GET %s: Content-Type %q", target, ct)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q, want nosniff", target, got)
		}
		cancel() // ends the /events stream
		resp.Body.Close()
	}
}
