package tenure_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
)

func TestUnhealthyWhenRenewalsAreOverdue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{})
		e := newElector(t, config(faultstore.Wrap(mem, f), "a"))
		cfg := e.Config()
		b := newBook()
		r := start(e, b.task("a", nil))
		<-b.began
		code := func() int { return probe(e.HealthHandler()) }
		if c := code(); c != http.StatusOK {
			t.Fatalf("healthy leader: %d", c)
		}
		f.Partition(faultstore.Hang)
		last := e.Status().LastRenew
		overdue := time.Duration(float64(cfg.RenewInterval)*cfg.Jitter) + cfg.RequestTimeout
		time.Sleep(time.Until(last.Add(overdue + time.Millisecond)))
		if !e.Status().Leading {
			t.Fatal("no longer leader before the renew deadline")
		}
		if err := e.Healthy(); err == nil {
			t.Fatalf("leader %s after its last renewal (overdue after %s) is healthy", time.Since(last), overdue)
		}
		if c := code(); c != http.StatusServiceUnavailable {
			t.Fatalf("overdue leader: health %d, want 503", c)
		}
		<-b.ended
		f.Heal()
		r.stop()
	})
}

func TestStalledTaskLoses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		cfg := config(store, "a")
		cfg.StallTimeout = 300 * time.Millisecond
		e := newElector(t, cfg)
		cfg = e.Config()
		b := newBook()
		stallAt := 2 * ttl
		var lastProgress atomic.Int64 // UnixNano
		release := make(chan struct{})
		r := start(e, b.task("a", func(ctx context.Context) error {
			end := time.Now().Add(stallAt)
			for time.Now().Before(end) {
				tenure.Progress(ctx)
				lastProgress.Store(time.Now().UnixNano())
				time.Sleep(50 * time.Millisecond)
			}
			<-release // stuck: no progress, and deaf to cancellation
			return nil
		}))
		<-b.began
		code := func() int { return probe(e.HealthHandler()) }
		time.Sleep(stallAt / 2)
		if err := e.Healthy(); err != nil || code() != http.StatusOK {
			t.Fatalf("task making progress: Healthy = %v", err)
		}
		tm := <-b.ended
		if !errors.Is(tm.cause, tenure.ErrStalled) {
			t.Fatalf("cause = %v, want ErrStalled", tm.cause)
		}
		if got := tm.done.Sub(time.Unix(0, lastProgress.Load())); got != cfg.StallTimeout {
			t.Errorf("cancelled %s after the last progress, want StallTimeout %s", got, cfg.StallTimeout)
		}
		// The stuck task outlives StopTimeout: unhealthy until it returns.
		time.Sleep(cfg.StopTimeout + time.Millisecond)
		if err := e.Healthy(); err == nil || code() != http.StatusServiceUnavailable {
			t.Fatalf("stalled task still running: Healthy = %v", err)
		}
		close(release)
		synctest.Wait()
		if err := e.Healthy(); err != nil || code() != http.StatusOK {
			t.Fatalf("after the task returned: Healthy = %v", err)
		}
		r.stop()
	})
}

func TestOverrunningTaskBlocksCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{})
		sp := &spy{Store: faultstore.Wrap(mem, f)}
		cfg := config(sp, "a")
		var mu sync.Mutex
		var events []tenure.Event
		cfg.OnEvent = func(ev tenure.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}
		e := newElector(t, cfg)
		cfg = e.Config()
		b := newBook()
		deaf := 5 * cfg.StopTimeout
		r := start(e, b.task("a", func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(deaf) // ignores cancellation for a while
			return nil
		}))
		<-b.began
		time.Sleep(ttl)
		f.Partition(faultstore.FailFast)
		tm := <-b.ended
		acquires := sp.acquires.Load()
		time.Sleep(cfg.StopTimeout + time.Millisecond)
		if err := e.Healthy(); err == nil || !e.Status().TaskOverrun {
			t.Fatalf("task overran StopTimeout: Healthy = %v, status %+v", err, e.Status())
		}
		mu.Lock()
		var overrun, lost *tenure.Event
		for i := range events {
			switch {
			case events[i].Kind == tenure.EventTaskOverrun:
				overrun = &events[i]
			case events[i].Kind == tenure.EventLost && overrun == nil:
				lost = &events[i]
			}
		}
		mu.Unlock()
		if overrun == nil || overrun.Time.Sub(tm.done) != cfg.StopTimeout || overrun.Term != tm.lease.Term {
			t.Fatalf("overrun event %+v, want one StopTimeout (%s) after cancellation at %v", overrun, cfg.StopTimeout, tm.done)
		}
		// The loss is reported as the task is cancelled, before the
		// overrun, not once the task returns.
		if lost == nil || !lost.Time.Equal(tm.done) || lost.Term != tm.lease.Term || !errors.Is(lost.Err, tenure.ErrRenewDeadline) {
			t.Fatalf("lost event before the overrun: %+v, want one for term %d at the cancellation (%v)", lost, tm.lease.Term, tm.done)
		}
		f.Heal()
		time.Sleep(deaf - cfg.StopTimeout - 2*time.Millisecond)
		if n := sp.acquires.Load() - acquires; n != 0 {
			t.Fatalf("%d Acquire calls while the cancelled task still ran", n)
		}
		// Once the task returns, the elector campaigns and leads again.
		next := <-b.began
		if next.lease.Term <= tm.lease.Term || !next.start.After(tm.done.Add(deaf)) {
			t.Fatalf("next term %d began at %v, want a later term after the old task returned", next.lease.Term, next.start)
		}
		if err := e.Healthy(); err != nil {
			t.Fatalf("healthy again after the task returned: %v", err)
		}
		r.stop()
	})
}

// probe returns the status code h answers a liveness probe with.
func probe(h http.Handler) int {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	return w.Code
}
