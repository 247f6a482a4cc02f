package httpview

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// countingReader counts the store reads made through it.
type countingReader struct {
	tenure.Reader
	gets atomic.Int64
}

func (r *countingReader) Get(ctx context.Context, key string) (tenure.Record, error) {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key)
}

// TestCandidatesReadsAreBounded: every GET /candidates read
// CandidateSlots keys from the store, and anyone who reaches the view
// (which has no authentication) may send them as fast as it likes: 64
// requests made 1024 reads, from the candidate's own process, on the
// store (and the connections or quota) its renewals need. Requests within
// readFresh share one read of the slots.
func TestCandidatesReadsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingReader{Reader: memory.New(nil)}
		view := mustNew(t, Options{Key: key, Store: store, Logger: slog.New(slog.DiscardHandler)})
		serve := func() {
			rec := httptest.NewRecorder()
			view.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/candidates", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("GET /candidates = %d %s", rec.Code, rec.Body)
			}
		}
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(serve)
		}
		wg.Wait()
		for range 32 {
			serve()
		}
		if n := store.gets.Load(); n != tenure.CandidateSlots {
			t.Errorf("64 requests at once read the store %d times, want %d (one read of the slots)", n, tenure.CandidateSlots)
		}
		time.Sleep(readFresh)
		serve()
		if n := store.gets.Load(); n != 2*tenure.CandidateSlots {
			t.Errorf("a request %s later: %d reads in all, want %d (a fresh read)", readFresh, n, 2*tenure.CandidateSlots)
		}
	})
}

// TestObserverHealthReadsAreBounded: an observer's /healthz and /readyz
// read the key from the store on every request, for anyone who asks;
// within readFresh requests share one read.
func TestObserverHealthReadsAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &countingReader{Reader: memory.New(nil)}
		view := mustNew(t, Options{Key: key, Store: store, Logger: slog.New(slog.DiscardHandler)})
		serve := func(target string) {
			rec := httptest.NewRecorder()
			view.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("GET %s = %d %s", target, rec.Code, rec.Body)
			}
		}
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() { serve("/healthz") })
			wg.Go(func() { serve("/readyz?standbyok") })
		}
		wg.Wait()
		if n := store.gets.Load(); n != 1 {
			t.Errorf("64 health checks at once read the store %d times, want 1", n)
		}
		time.Sleep(readFresh)
		serve("/healthz")
		if n := store.gets.Load(); n != 2 {
			t.Errorf("a health check %s later: %d reads in all, want 2", readFresh, n)
		}
	})
}
