package tenure_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
)

const ttl = time.Second

// config returns a test elector config on store with the defaults of a 1s
// TTL, a quiet logger and a fixed jitter seed.
func config(store tenure.Store, id string) tenure.Config {
	return tenure.Config{
		Store:    store,
		Key:      "job",
		Identity: id,
		TTL:      ttl,
		Logger:   slog.New(slog.DiscardHandler),
		Rand:     rand.New(rand.NewPCG(1, uint64(len(id)))),
	}
}

func newElector(t *testing.T, cfg tenure.Config) *tenure.Elector {
	t.Helper()
	e, err := tenure.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// running is an elector's Run in a goroutine.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func start(e *tenure.Elector, task tenure.Task) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- e.Run(ctx, task) }()
	return r
}

// stop cancels Run and returns its error.
func (r *running) stop() error {
	r.cancel()
	return <-r.done
}

// term is one leader task's life, as seen from inside the bubble.
type term struct {
	id         string
	lease      tenure.Lease
	start      time.Time
	done       time.Time // when the leader context was seen done
	cause      error
	isLeaderCt bool
}

// book records leader tasks.
type book struct {
	mu    sync.Mutex
	terms []*term
	live  int
	max   int // most tasks live at once
	began chan *term
	ended chan *term
}

func newBook() *book {
	return &book{began: make(chan *term, 100), ended: make(chan *term, 100)}
}

// task returns a task for elector id that records its term and then does
// what body says (body nil: wait for cancellation).
func (b *book) task(id string, body func(ctx context.Context) error) tenure.Task {
	return func(ctx context.Context) error {
		lease, ok := tenure.LeaseFrom(ctx)
		tm := &term{id: id, lease: lease, start: time.Now(), isLeaderCt: ok}
		b.mu.Lock()
		b.terms = append(b.terms, tm)
		b.live++
		b.max = max(b.max, b.live)
		b.mu.Unlock()
		b.began <- tm
		// A task runs until it returns: that is what the elector waits
		// for before it gives the lease back.
		defer func() {
			b.mu.Lock()
			b.live--
			b.mu.Unlock()
		}()
		go func() {
			<-ctx.Done()
			b.mu.Lock()
			tm.done, tm.cause = time.Now(), context.Cause(ctx)
			b.mu.Unlock()
			b.ended <- tm
		}()
		if body != nil {
			return body(ctx)
		}
		<-ctx.Done()
		return nil
	}
}

func TestRunElectsOneAndKeepsItThroughRenewals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		var electors []*tenure.Elector
		var runs []*running
		for _, id := range []string{"a", "b", "c"} {
			e := newElector(t, config(store, id))
			electors = append(electors, e)
			runs = append(runs, start(e, b.task(id, nil)))
		}
		first := <-b.began
		if !first.isLeaderCt || first.lease.Key != "job" || first.lease.Identity != first.id || first.lease.Term != 1 {
			t.Fatalf("leader context lease = %+v (ok=%v), want key job, identity %s, term 1", first.lease, first.isLeaderCt, first.id)
		}
		began := time.Now()
		time.Sleep(20 * ttl)
		synctest.Wait()
		b.mu.Lock()
		n, most := len(b.terms), b.max
		b.mu.Unlock()
		if n != 1 || most != 1 {
			t.Fatalf("after 20 TTLs: %d terms began, at most %d at once; want the first leader to keep leading", n, most)
		}
		for _, e := range electors {
			s := e.Status()
			if s.Identity != first.id {
				if s.Leading || s.Holder != first.id || s.HolderTerm != 1 {
					t.Errorf("follower %s status %+v, want holder %s term 1", s.Identity, s, first.id)
				}
				continue
			}
			c := e.Config()
			if !s.Leading || s.Term != 1 || s.Elected != 1 || s.Since != began {
				t.Errorf("leader status %+v, want leader of term 1 since %v", s, began)
			}
			if since := time.Since(s.LastRenew); since > time.Duration(float64(c.RenewInterval)*c.Jitter) {
				t.Errorf("last renewal sent %s ago, longer than the renew interval", since)
			}
			if s.Deadline != s.LastRenew.Add(c.RenewDeadline) {
				t.Errorf("deadline %v, want last renewal + RenewDeadline", s.Deadline)
			}
			if err := e.Healthy(); err != nil {
				t.Errorf("renewing leader unhealthy: %v", err)
			}
		}
		for _, r := range runs {
			if err := r.stop(); !errors.Is(err, context.Canceled) {
				t.Errorf("Run returned %v, want context.Canceled", err)
			}
		}
	})
}

func TestGracefulHandoffWakesFollowerAtOnce(t *testing.T) {
	for _, poll := range []bool{false, true} {
		name := map[bool]string{false: "watch", true: "poll"}[poll]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var store tenure.Store = memory.New(nil)
				if poll {
					store = faultstore.PollOnly(store)
				}
				b := newBook()
				work := 3 * ttl
				task := func(id string) tenure.Task {
					return b.task(id, func(ctx context.Context) error {
						select {
						case <-time.After(work):
						case <-ctx.Done():
						}
						return nil
					})
				}
				ra := start(newElector(t, config(store, "a")), task("a"))
				first := <-b.began
				rb := start(newElector(t, config(store, "b")), task("b"))
				second := <-b.began
				if second.id == first.id || second.lease.Term != first.lease.Term+1 {
					t.Fatalf("second term %+v after %+v, want the other candidate with the next term", second.lease, first.lease)
				}
				gap := second.start.Sub(first.start.Add(work))
				cfg := config(store, "x").WithDefaults()
				limit := time.Millisecond // woken by the watch at once
				if poll {
					limit = time.Duration(float64(cfg.RetryInterval) * cfg.Jitter)
				}
				if gap < 0 || gap > limit {
					t.Errorf("follower started %s after the leader's task returned, want within %s (TTL is %s)", gap, limit, cfg.TTL)
				}
				ra.stop()
				rb.stop()
			})
		})
	}
}

// spy counts the calls an elector makes, before any fault applies.
type spy struct {
	tenure.Store
	acquires, renews, releases atomic.Int64
}

func (s *spy) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	s.acquires.Add(1)
	return s.Store.Acquire(ctx, key, id, ttl)
}

func (s *spy) Renew(ctx context.Context, l tenure.Lease) error {
	s.renews.Add(1)
	return s.Store.Renew(ctx, l)
}

func (s *spy) Release(ctx context.Context, l tenure.Lease) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, l)
}

func TestPartitionCancelsLeaderByRenewDeadline(t *testing.T) {
	for _, mode := range []faultstore.PartitionMode{faultstore.Hang, faultstore.FailFast} {
		t.Run(map[faultstore.PartitionMode]string{faultstore.Hang: "hang", faultstore.FailFast: "fail-fast"}[mode], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.New(nil)
				f := faultstore.New(faultstore.Plan{})
				cfg := config(faultstore.Wrap(mem, f), "a")
				e := newElector(t, cfg)
				cfg = e.Config()
				b := newBook()
				r := start(e, b.task("a", nil))
				<-b.began
				time.Sleep(5*ttl + 123*time.Millisecond)
				lastRenew := e.Status().LastRenew
				f.Partition(mode)
				cut := time.Now()
				tm := <-b.ended
				if !errors.Is(tm.cause, tenure.ErrRenewDeadline) {
					t.Fatalf("leader context cause = %v, want ErrRenewDeadline", tm.cause)
				}
				if limit := lastRenew.Add(cfg.RenewDeadline); tm.done.After(limit) {
					t.Fatalf("leader context done at +%s after the last renewal was sent, later than RenewDeadline %s",
						tm.done.Sub(lastRenew), cfg.RenewDeadline)
				}
				// The store could regrant the key only TTL after it received
				// the last renewal, which it did no earlier than it was sent.
				if !tm.done.Before(lastRenew.Add(cfg.TTL)) {
					t.Fatalf("leader context done at +%s, not before TTL", tm.done.Sub(lastRenew))
				}
				if tm.done.Before(cut) {
					t.Fatalf("cancelled before the partition began")
				}
				f.Heal()
				r.stop()
			})
		})
	}
}

// A grant ended behind the leader's back cancels its task without a
// Release: at once through the leader's watch of the key, or at the next
// renewal when the store cannot watch.
func TestRenewLostCancelsWithoutRelease(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(map[bool]string{true: "watch", false: "poll"}[watch], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testRenewLost(t, watch) })
		})
	}
}

func testRenewLost(t *testing.T, watch bool) {
	mem := memory.New(nil)
	sp := &spy{Store: mem}
	var st tenure.Store = sp
	if !watch {
		st = faultstore.PollOnly(sp)
	}
	e := newElector(t, config(st, "a"))
	b := newBook()
	r := start(e, b.task("a", nil))
	tm := <-b.began
	time.Sleep(2*ttl + 50*time.Millisecond)
	// Somebody else ends the grant behind the elector's back.
	if err := mem.Release(context.Background(), tm.lease); err != nil {
		t.Fatal(err)
	}
	renewsBefore := sp.renews.Load()
	lostAt := time.Now()
	<-b.ended
	if !errors.Is(tm.cause, tenure.ErrLost) {
		t.Fatalf("cause = %v, want ErrLost", tm.cause)
	}
	renews, took := sp.renews.Load()-renewsBefore, time.Since(lostAt)
	switch {
	case watch && (renews != 0 || took != 0):
		// The watch pushes the loss: no renewal, no time passing on the
		// bubble's clock.
		t.Fatalf("cancelled %s and %d renewals after the loss, want at once and none", took, renews)
	case !watch && renews != 1:
		t.Fatalf("%d renewals after the loss before cancellation, want 1", renews)
	}
	synctest.Wait()
	if n := sp.releases.Load(); n != 0 {
		t.Fatalf("%d Release calls after ErrLost, want none", n)
	}
	r.stop()
}

func TestDo(t *testing.T) {
	boom := errors.New("boom")
	t.Run("returns the task's error and releases", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := memory.New(nil)
			e := newElector(t, config(mem, "a"))
			runs := 0
			err := e.Do(context.Background(), func(ctx context.Context) error {
				runs++
				if _, ok := tenure.LeaseFrom(ctx); !ok {
					t.Error("Do's task has no lease")
				}
				time.Sleep(3 * ttl) // across renewals
				return boom
			})
			if !errors.Is(err, boom) || runs != 1 {
				t.Fatalf("Do = %v after %d runs, want boom after 1", err, runs)
			}
			if r, _ := mem.Get(context.Background(), "job"); r.Held() {
				t.Fatalf("lease still held after Do: %+v", r)
			}
		})
	})
	t.Run("leadership lost first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := memory.New(nil)
			f := faultstore.New(faultstore.Plan{})
			e := newElector(t, config(faultstore.Wrap(mem, f), "a"))
			err := e.Do(context.Background(), func(ctx context.Context) error {
				f.Partition(faultstore.FailFast)
				<-ctx.Done()
				return boom
			})
			if !errors.Is(err, tenure.ErrRenewDeadline) {
				t.Fatalf("Do = %v, want ErrRenewDeadline", err)
			}
		})
	})
	t.Run("ctx done while campaigning", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := memory.New(nil)
			if _, err := mem.Acquire(context.Background(), "job", "other", time.Hour); err != nil {
				t.Fatal(err)
			}
			e := newElector(t, config(mem, "a"))
			ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
			defer cancel()
			ran := false
			err := e.Do(ctx, func(context.Context) error { ran = true; return nil })
			if !errors.Is(err, context.DeadlineExceeded) || ran {
				t.Fatalf("Do = %v (task ran: %v), want the context's error without running", err, ran)
			}
		})
	})
	t.Run("one at a time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newElector(t, config(memory.New(nil), "a"))
			b := newBook()
			r := start(e, b.task("a", nil))
			<-b.began
			if err := e.Do(context.Background(), nil); !errors.Is(err, tenure.ErrRunning) {
				t.Fatalf("Do while running = %v, want ErrRunning", err)
			}
			r.stop()
		})
	})
}

func TestRunCancelReleasesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		e := newElector(t, config(mem, "a"))
		b := newBook()
		r := start(e, b.task("a", nil))
		tm := <-b.began
		time.Sleep(ttl / 2)
		stopped := time.Now()
		if err := r.stop(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
		if !time.Now().Equal(stopped) {
			t.Fatalf("Run took %s to return", time.Since(stopped))
		}
		l, err := mem.Acquire(context.Background(), "job", "b", ttl)
		if err != nil {
			t.Fatalf("another candidate cannot acquire right after Run returned: %v", err)
		}
		if l.Term != tm.lease.Term+1 {
			t.Fatalf("term %d after %d", l.Term, tm.lease.Term)
		}
	})
}

func TestEventsInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		fa := faultstore.New(faultstore.Plan{})
		type rec struct {
			who  string
			kind tenure.EventKind
			ev   tenure.Event
		}
		var mu sync.Mutex
		var log []rec
		on := func(who string) func(tenure.Event) {
			return func(ev tenure.Event) {
				mu.Lock()
				defer mu.Unlock()
				log = append(log, rec{who, ev.Kind, ev})
			}
		}
		ca := config(faultstore.Wrap(mem, fa), "a")
		ca.OnEvent = on("a")
		cb := config(mem, "b")
		cb.OnEvent = on("b")
		b := newBook()
		ra := start(newElector(t, ca), b.task("a", nil))
		<-b.began
		rb := start(newElector(t, cb), b.task("b", nil))
		time.Sleep(2 * ttl)
		fa.SetRates(faultstore.Rates{Ops: faultstore.OpRenew, FailBefore: 1})
		<-b.began // b takes over once a's grant expired
		time.Sleep(ttl)
		ra.stop()
		rb.stop()

		mu.Lock()
		defer mu.Unlock()
		var seq []string
		for _, r := range log {
			switch r.kind {
			case tenure.EventAcquired, tenure.EventAcquireFailed, tenure.EventRenewed:
				continue // per request; counted in TestRequestEvents
			}
			s := r.who + ":" + r.kind.String()
			switch r.kind {
			case tenure.EventLeaderChanged:
				s += "(" + r.ev.Holder + ")"
			case tenure.EventLost:
				if errors.Is(r.ev.Err, tenure.ErrRenewDeadline) {
					s += "(deadline)"
				}
			}
			if len(seq) == 0 || seq[len(seq)-1] != s { // collapse repeats
				seq = append(seq, s)
			}
		}
		want := []string{
			"a:elected",
			"b:leader-changed(a)",
			"a:renew-failed",
			"a:lost(deadline)",
			"b:leader-changed()",
			"b:elected",
			"a:leader-changed(b)",
			"b:released",
		}
		// a releases right after its task stopped, and only then reports
		// the loss: b may see the key free in between.
		if i := slices.Index(seq, "b:leader-changed()"); i > 0 && seq[i-1] == "a:renew-failed" && i+1 < len(seq) && seq[i+1] == "a:lost(deadline)" {
			seq[i], seq[i+1] = seq[i+1], seq[i]
		}
		if !slices.Equal(seq, want) {
			t.Fatalf("events:\n  %q\nwant\n  %q", seq, want)
		}
	})
}

// A store whose watch setup hangs (a stuck watch stream) must not keep a
// candidate from campaigning: Watch is bounded like every request, and the
// candidate polls instead.
func TestHangingWatchDoesNotBlockCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Rates: faultstore.Rates{Ops: faultstore.OpWatch, DelayBefore: 1, MaxDelay: 1000 * time.Hour}, Seed: 3})
		e := newElector(t, config(faultstore.Wrap(mem, f), "a"))
		b := newBook()
		begin := time.Now()
		r := start(e, b.task("a", nil))
		select {
		case tm := <-b.began:
			if waited := tm.start.Sub(begin); waited > e.Config().RequestTimeout {
				t.Errorf("elected %s after start, want within RequestTimeout %s", waited, e.Config().RequestTimeout)
			}
		case <-time.After(10 * ttl):
			t.Fatal("not elected within 10 TTLs of a free key: stuck setting up a watch")
		}
		r.stop()
	})
}

// TestRequestEvents: every Acquire and every successful renewal is an
// event with its round trip, so metrics need not wrap the store.
func TestRequestEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		var mu sync.Mutex
		count := map[tenure.EventKind]int{}
		on := func(ev tenure.Event) {
			mu.Lock()
			defer mu.Unlock()
			count[ev.Kind]++
			if ev.Kind == tenure.EventAcquireFailed && !errors.Is(ev.Err, tenure.ErrHeld) {
				t.Errorf("acquire failed with %v, want ErrHeld", ev.Err)
			}
		}
		ca, cb := config(mem, "a"), config(mem, "b")
		ca.OnEvent, cb.OnEvent = on, on
		b := newBook()
		ra := start(newElector(t, ca), b.task("a", nil))
		<-b.began
		rb := start(newElector(t, cb), b.task("b", nil))
		time.Sleep(ttl)
		rb.stop() // first, so that b never takes over
		ra.stop()
		mu.Lock()
		defer mu.Unlock()
		// a renews every TTL/3 (jittered up to 1.2×) for one TTL.
		if count[tenure.EventAcquired] != 1 || count[tenure.EventAcquireFailed] < 1 || count[tenure.EventRenewed] < 2 {
			t.Fatalf("events %v: want a's grant, b's refusals and a's renewals", count)
		}
	})
}
