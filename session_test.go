package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// counted is a memory store whose sessions count their calls, and whose
// keep-alives can be made to hang (a partition) until their context ends.
type counted struct {
	*memory.Store
	renews, opens, keepAlives atomic.Int64
	partitioned               atomic.Bool
	// gate, if set, holds every keep-alive until it is closed.
	gate atomic.Pointer[chan struct{}]

	mu       sync.Mutex
	lastSent time.Time // when the last successful keep-alive was sent
}

func (c *counted) Renew(ctx context.Context, l tenure.Lease) error {
	c.renews.Add(1)
	return c.Store.Renew(ctx, l)
}

// cut hangs until ctx ends while the store is partitioned away.
func (c *counted) cut(ctx context.Context) error {
	if c.partitioned.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (c *counted) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	if err := c.cut(ctx); err != nil {
		return nil, err
	}
	c.opens.Add(1)
	ss, err := c.Store.OpenSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return &countedSession{StoreSession: ss, c: c}, nil
}

type countedSession struct {
	tenure.StoreSession
	c *counted
}

func (s *countedSession) Acquire(ctx context.Context, key, id, value string) (tenure.Lease, error) {
	if err := s.c.cut(ctx); err != nil {
		return tenure.Lease{}, err
	}
	return s.StoreSession.Acquire(ctx, key, id, value)
}

func (s *countedSession) Release(ctx context.Context, l tenure.Lease) error {
	if err := s.c.cut(ctx); err != nil {
		return err
	}
	return s.StoreSession.Release(ctx, l)
}

func (s *countedSession) Close(ctx context.Context) error {
	if err := s.c.cut(ctx); err != nil {
		return err
	}
	return s.StoreSession.Close(ctx)
}

func (s *countedSession) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	s.c.keepAlives.Add(1)
	sent := time.Now()
	if g := s.c.gate.Load(); g != nil {
		<-*g
	}
	if err := s.c.cut(ctx); err != nil {
		return nil, err
	}
	gone, err := s.StoreSession.KeepAlive(ctx)
	if err == nil {
		s.c.mu.Lock()
		s.c.lastSent = sent
		s.c.mu.Unlock()
	}
	return gone, err
}

func newSession(t *testing.T, st tenure.Store) *tenure.Session {
	t.Helper()
	s, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: ttl, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	return s
}

// mustClose closes s, failing the test if Close reports an error.
func mustClose(t *testing.T, s *tenure.Session) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatalf("Session.Close: %v", err)
	}
}

// sessionElector returns p1's elector on key in session s (no store or
// TTL of its own).
func sessionElector(t *testing.T, s *tenure.Session, key string) *tenure.Elector {
	t.Helper()
	cfg := config(nil, "p1")
	cfg.Store, cfg.TTL, cfg.Session, cfg.Key = nil, 0, s, key
	return newElector(t, cfg)
}

// fleet is n electors on keys k0..k(n-1), all in session s, running.
type fleet struct {
	electors []*tenure.Elector
	runs     []*running
	book     *book
}

// startFleet opens a session on st and starts a fleet of n electors in it.
func startFleet(t *testing.T, st tenure.Store, n int) (*tenure.Session, *fleet) {
	t.Helper()
	s := newSession(t, st)
	f := &fleet{book: &book{began: make(chan *term, n*4), ended: make(chan *term, n*4)}}
	for i := range n {
		key := fmt.Sprintf("k%d", i)
		e := sessionElector(t, s, key)
		f.electors = append(f.electors, e)
		f.runs = append(f.runs, start(e, f.book.task(key, nil)))
	}
	return s, f
}

func (f *fleet) leading() (n int) {
	for _, e := range f.electors {
		if e.Status().Leading {
			n++
		}
	}
	return n
}

// stop ends every Run, then the session.
func (f *fleet) stop(t *testing.T, s *tenure.Session) {
	t.Helper()
	for _, r := range f.runs {
		r.cancel()
	}
	for _, r := range f.runs {
		<-r.done
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Session.Close: %v", err)
	}
}

func TestSessionLeadsManyKeysWithOneKeepAlivePerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &counted{Store: memory.New(nil)}
		const n = 200
		s, f := startFleet(t, st, n)
		synctest.Wait()
		if got := f.leading(); got != n {
			t.Fatalf("%d of %d electors lead", got, n)
		}
		kaBefore := st.keepAlives.Load()
		const idle = 10 * ttl
		time.Sleep(idle)
		synctest.Wait()
		if got := f.leading(); got != n {
			t.Fatalf("after %s, %d of %d electors lead", idle, got, n)
		}
		if r := st.renews.Load(); r != 0 {
			t.Errorf("%d per-key renewals, want none: the session keeps the grants", r)
		}
		// One keep-alive every RenewInterval (TTL/3), whatever n.
		if ka, want := st.keepAlives.Load()-kaBefore, int64(idle/(ttl/3)); ka < want-1 || ka > want+1 {
			t.Errorf("%d keep-alives in %s, want about %d", ka, idle, want)
		}
		if o := st.opens.Load(); o != 1 {
			t.Errorf("%d sessions opened, want 1", o)
		}
		for _, e := range f.electors[:3] {
			st := e.Status()
			if d := time.Until(st.Deadline); d <= 0 || d > s.Config().RenewDeadline {
				t.Errorf("%s: deadline %s away, want within the renew deadline", st.Key, d)
			}
		}
		f.stop(t, s)
		if rec, _ := st.Get(context.Background(), "k7"); rec.Held() {
			t.Errorf("after Run returned, k7 is still held: %+v", rec)
		}
	})
}

func TestSessionPartitionCancelsEveryTaskByTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &counted{Store: memory.New(nil)}
		const n = 20
		s, f := startFleet(t, st, n)
		for range n {
			<-f.book.began
		}
		time.Sleep(ttl) // a few keep-alives
		synctest.Wait()
		st.partitioned.Store(true)
		for range n {
			<-f.book.ended
		}
		st.mu.Lock()
		deadline := st.lastSent.Add(s.Config().RenewDeadline)
		st.mu.Unlock()
		var lastEnd time.Time
		f.book.mu.Lock()
		for _, tm := range f.book.terms {
			if tm.done.After(lastEnd) {
				lastEnd = tm.done
			}
			if tm.done.After(deadline) {
				t.Errorf("%s: task ended %s after the renew deadline of the last keep-alive", tm.id, tm.done.Sub(deadline))
			}
			if !errors.Is(tm.cause, tenure.ErrRenewDeadline) {
				t.Errorf("%s: cause %v, want ErrRenewDeadline", tm.id, tm.cause)
			}
		}
		f.book.mu.Unlock()
		// Healed, the electors lead again in a new session, each after every
		// task of the old one ended: the old session is closed only then.
		st.partitioned.Store(false)
		for range n {
			tm := <-f.book.began
			if tm.start.Before(lastEnd) {
				t.Errorf("%s: led again %s before the last task of the old session ended", tm.id, lastEnd.Sub(tm.start))
			}
		}
		if o := st.opens.Load(); o != 2 {
			t.Errorf("%d sessions opened, want 2", o)
		}
		f.stop(t, s)
	})
}

func TestSessionGrantEndedFromOutsideEndsOnlyItsTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		s, f := startFleet(t, mem, 10)
		synctest.Wait()
		var k3 tenure.Lease
		for range 10 {
			if tm := <-f.book.began; tm.id == "k3" {
				k3 = tm.lease
			}
		}
		// Ended from outside: another client releases it with its lease.
		deleted := time.Now()
		if err := mem.Release(context.Background(), k3); err != nil {
			t.Fatal(err)
		}
		tm := <-f.book.ended
		if tm.id != "k3" || !errors.Is(tm.cause, tenure.ErrLost) {
			t.Fatalf("ended: %s with %v, want k3 with ErrLost", tm.id, tm.cause)
		}
		if d := tm.done.Sub(deleted); d > s.Config().RenewInterval {
			t.Errorf("k3 noticed its deletion after %s, want within a keep-alive interval (%s)", d, s.Config().RenewInterval)
		}
		synctest.Wait()
		if got := f.leading(); got < 9 {
			t.Errorf("%d electors lead after one grant was deleted, want the other 9 at least", got)
		}
		again := <-f.book.began
		if again.id != "k3" || again.lease.Term <= tm.lease.Term {
			t.Errorf("next term: %s term %d, want k3 above term %d", again.id, again.lease.Term, tm.lease.Term)
		}
		f.stop(t, s)
	})
}

func TestSessionCloseEndsEveryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		s, f := startFleet(t, mem, 5)
		synctest.Wait()
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for i, r := range f.runs {
			if err := <-r.done; !errors.Is(err, tenure.ErrClosed) {
				t.Errorf("Run %d after the session closed: %v, want ErrClosed", i, err)
			}
		}
		for i := range 5 {
			if rec, _ := mem.Get(context.Background(), fmt.Sprintf("k%d", i)); rec.Held() {
				t.Errorf("k%d still held after the session closed: %+v", i, rec)
			}
		}
	})
}

func TestSessionConfigErrors(t *testing.T) {
	mem := memory.New(nil)
	if _, err := tenure.NewSession(tenure.SessionConfig{Store: plainStore{mem}}); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("NewSession on a store without sessions: %v, want ErrUnsupported", err)
	}
	_, err := tenure.NewSession(tenure.SessionConfig{Store: mem, TTL: time.Second, RenewDeadline: 2 * time.Second})
	if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "SessionConfig.RenewDeadline") {
		t.Errorf("NewSession with a renew deadline past the TTL: %v, want ErrInvalid naming SessionConfig.RenewDeadline", err)
	}
	s, err := tenure.NewSession(tenure.SessionConfig{Store: mem, TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(mem, "a")
	cfg.Session, cfg.TTL = s, 2*time.Second
	if _, err := tenure.New(cfg); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "Config.TTL") {
		t.Errorf("New with a TTL other than the session's: %v, want ErrInvalid naming Config.TTL", err)
	}
	cfg = config(memory.New(nil), "a")
	cfg.Session, cfg.TTL = s, 0
	if _, err := tenure.New(cfg); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "Config.Store") {
		t.Errorf("New with a store other than the session's: %v, want ErrInvalid naming Config.Store", err)
	}
}

func TestSessionKeepAliveInFlightDoesNotCoverAGrantMadeMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &counted{Store: memory.New(nil)}
		s, first := startFleet(t, st, 1) // k0: opens the session
		<-first.book.began
		gate := make(chan struct{})
		st.gate.Store(&gate)
		kas := st.keepAlives.Load()
		for st.keepAlives.Load() == kas {
			time.Sleep(10 * time.Millisecond) // until a keep-alive is in flight
		}
		e := sessionElector(t, s, "late")
		b := newBook()
		r := start(e, b.task("late", nil))
		<-b.began
		before := e.Status().Deadline
		st.gate.Store(nil)
		close(gate) // the keep-alive in flight returns
		synctest.Wait()
		if got := e.Status().Deadline; !got.Equal(before) {
			t.Errorf("a keep-alive sent before the grant was made moved its deadline by %s", got.Sub(before))
		}
		if got := first.electors[0].Status().Deadline; !got.After(before) {
			t.Errorf("the keep-alive did not move the deadline of the grant it covered")
		}
		time.Sleep(s.Config().RenewInterval) // the next keep-alive covers it
		synctest.Wait()
		if got := e.Status().Deadline; !got.After(before) {
			t.Errorf("the next keep-alive did not move the late grant's deadline")
		}
		r.cancel()
		<-r.done
		first.stop(t, s)
	})
}

// An elector that stopped asking after an Acquire without an answer gives
// back what the store may have granted it, by asking again and releasing:
// never a grant that another elector of the session now leads with, which
// the store returns to that same question (found by the shard
// simulations: a key moved away and back had two leaders for 47 ms).
func TestSessionGivingBackSparesAGrantInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		s, f := startFleet(t, mem, 1)
		tm := <-f.book.began
		s.SettleForTest("k0", "p1", "")
		synctest.Wait()
		if rec, _ := mem.Get(context.Background(), "k0"); rec.Holder != "p1" || rec.Term != tm.lease.Term {
			t.Errorf("after an earlier elector gave its key back, the record is %+v, want p1's term %d", rec, tm.lease.Term)
		}
		time.Sleep(s.Config().RenewInterval)
		synctest.Wait()
		select {
		case ended := <-f.book.ended:
			t.Errorf("the leading elector lost its term: %v", ended.cause)
		default:
		}
		f.stop(t, s)
	})
}
