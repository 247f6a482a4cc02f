package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// campaignAll leads keys k0..k(n-1) through s, one Campaign after the
// other.
func campaignAll(t *testing.T, s *tenure.Session, n int) []*tenure.Leadership {
	t.Helper()
	ls := make([]*tenure.Leadership, n)
	for i := range ls {
		l, err := s.Campaign(context.Background(), fmt.Sprintf("k%d", i), "p1", "")
		if err != nil {
			t.Fatalf("Campaign k%d: %v", i, err)
		}
		ls[i] = l
	}
	return ls
}

// ended records when each leadership's context was cancelled, and why.
type ended struct {
	mu    sync.Mutex
	at    map[string]time.Time
	cause map[string]error
	wg    sync.WaitGroup
}

// follow watches ls from the test (the leaderships have no goroutine of
// their own to watch).
func follow(ls []*tenure.Leadership) *ended {
	e := &ended{at: map[string]time.Time{}, cause: map[string]error{}}
	for _, l := range ls {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			<-l.Done()
			e.mu.Lock()
			e.at[l.Lease().Key], e.cause[l.Lease().Key] = time.Now(), context.Cause(l.Context())
			e.mu.Unlock()
		}()
	}
	return e
}

// campaignAtOnce leads keys k0..k(n-1) through s, all campaigns at once,
// and returns the leaderships in the order they came.
func campaignAtOnce(t *testing.T, s *tenure.Session, n int) []*tenure.Leadership {
	t.Helper()
	got := make(chan *tenure.Leadership, n)
	for i := range n {
		go func() {
			l, err := s.Campaign(context.Background(), fmt.Sprintf("k%d", i), "p1", "")
			if err != nil {
				t.Errorf("Campaign k%d: %v", i, err)
			}
			got <- l
		}()
	}
	ls := make([]*tenure.Leadership, 0, n)
	for range n {
		ls = append(ls, <-got)
	}
	return ls
}

func resignAll(ls []*tenure.Leadership) {
	for _, l := range ls {
		l.Resign(context.Background())
	}
}

func TestCampaignLeadsManyKeysWithoutAGoroutinePerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &counted{Store: memory.New(nil)}
		s := newSession(t, st)
		before := runtime.NumGoroutine()
		const n = 500
		ls := campaignAll(t, s, n)
		synctest.Wait()
		// The session's keep-alive loop, and nothing per key.
		if g := runtime.NumGoroutine() - before; g > 3 {
			t.Errorf("%d more goroutines while leading %d keys, want a few at most", g, n)
		}
		kaBefore := st.keepAlives.Load()
		const idle = 10 * ttl
		time.Sleep(idle)
		synctest.Wait()
		if ka, want := st.keepAlives.Load()-kaBefore, int64(idle/(ttl/3)); ka < want-1 || ka > want+1 {
			t.Errorf("%d keep-alives in %s, want about %d", ka, idle, want)
		}
		for i, l := range ls {
			if err := l.Context().Err(); err != nil {
				t.Fatalf("k%d: leadership ended while idle: %v", i, context.Cause(l.Context()))
			}
			if d := time.Until(l.Term().Deadline()); d <= 0 || d > s.Config().RenewDeadline {
				t.Fatalf("k%d: deadline %s away, want within the renew deadline", i, d)
			}
			if lease, ok := tenure.LeaseFrom(l.Context()); !ok || lease != l.Lease() {
				t.Fatalf("k%d: LeaseFrom(Context()) = %+v, %v; want the leadership's lease", i, lease, ok)
			}
		}
		resignAll(ls)
		for i := range n {
			if rec, _ := st.Get(context.Background(), fmt.Sprintf("k%d", i)); rec.Held() {
				t.Fatalf("k%d still held after Resign: %+v", i, rec)
			}
		}
		mustClose(t, s)
	})
}

func TestCampaignPartitionCancelsByTheDeadlineAndKeepsKeysUntilResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &counted{Store: memory.New(nil)}
		s := newSession(t, st)
		const n = 20
		ls := campaignAll(t, s, n)
		e := follow(ls)
		time.Sleep(ttl) // a few keep-alives
		synctest.Wait()
		st.partitioned.Store(true)
		e.wg.Wait()
		st.mu.Lock()
		deadline := st.lastSent.Add(s.Config().RenewDeadline)
		st.mu.Unlock()
		for key, at := range e.at {
			if at.After(deadline) {
				t.Errorf("%s: context done %s after the renew deadline of the last keep-alive", key, at.Sub(deadline))
			}
			if !errors.Is(e.cause[key], tenure.ErrRenewDeadline) {
				t.Errorf("%s: cause %v, want ErrRenewDeadline", key, e.cause[key])
			}
		}
		// Healed: nothing is released and the old store session stays open
		// while a leadership is not resigned (its caller may still work).
		st.partitioned.Store(false)
		synctest.Wait()
		if rec, _ := st.Get(context.Background(), "k0"); !rec.Held() || rec.Term != ls[0].Lease().Term {
			t.Errorf("k0 before Resign: %+v, want still held at term %d", rec, ls[0].Lease().Term)
		}
		resignAll(ls)
		synctest.Wait()
		if rec, _ := st.Get(context.Background(), "k0"); rec.Held() {
			t.Errorf("k0 after every Resign: %+v, want free (the old session closed)", rec)
		}
		again := campaignAll(t, s, 1)
		if again[0].Lease().Term <= ls[0].Lease().Term {
			t.Errorf("k0 led again at term %d, want above %d", again[0].Lease().Term, ls[0].Lease().Term)
		}
		if o := st.opens.Load(); o != 2 {
			t.Errorf("%d sessions opened, want 2", o)
		}
		resignAll(again)
		mustClose(t, s)
	})
}

func TestCampaignGrantEndedFromOutsideEndsOnlyIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		s := newSession(t, mem)
		ls := campaignAll(t, s, 10)
		e := follow(ls[3:4])
		deleted := time.Now()
		if err := mem.Release(context.Background(), ls[3].Lease()); err != nil {
			t.Fatal(err)
		}
		e.wg.Wait()
		if at := e.at["k3"]; at.Sub(deleted) > s.Config().RenewInterval {
			t.Errorf("k3 noticed its deletion after %s, want within a keep-alive interval", at.Sub(deleted))
		}
		if !errors.Is(e.cause["k3"], tenure.ErrLost) {
			t.Errorf("k3: cause %v, want ErrLost", e.cause["k3"])
		}
		synctest.Wait()
		for i, l := range ls {
			if i != 3 && l.Context().Err() != nil {
				t.Errorf("k%d ended with k3: %v", i, context.Cause(l.Context()))
			}
		}
		ls[3].Resign(context.Background())
		l, err := s.Campaign(context.Background(), "k3", "p1", "")
		if err != nil || l.Lease().Term <= ls[3].Lease().Term {
			t.Fatalf("k3 again: %+v, %v; want a later term than %d", l, err, ls[3].Lease().Term)
		}
		resignAll(append(ls, l))
		mustClose(t, s)
	})
}

func TestCampaignWaitsWhileHeldAndRespectsCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		s := newSession(t, mem)
		other, err := mem.Acquire(context.Background(), "job", "other", ttl)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl/2)
		if _, err := s.Campaign(ctx, "job", "p1", ""); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Campaign for a held key until ctx ended: %v, want DeadlineExceeded", err)
		}
		cancel()
		got := campaignInBackground(t, s, "job", "p1")
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("Campaign returned while another held the key")
		default:
		}
		released := time.Now()
		if err := mem.Release(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		l := <-got
		if d := time.Since(released); d > 0 {
			t.Errorf("Campaign took %s after the release, want at once (it watches the key)", d)
		}
		if l.Lease().Term <= other.Term || l.Lease().Identity != "p1" {
			t.Errorf("leadership %+v, want p1 above term %d", l.Lease(), other.Term)
		}
		l.Resign(context.Background())
		mustClose(t, s)
	})
}

func TestCampaignSessionCloseEndsLeadershipsAndWaitsForResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		s := newSession(t, mem)
		ls := campaignAll(t, s, 3)
		ctx, cancel := context.WithTimeout(context.Background(), ttl/10) // short of expiry
		err := s.Close(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Close with leaderships not resigned: %v, want it to wait until ctx ended", err)
		}
		for i, l := range ls {
			if !errors.Is(context.Cause(l.Context()), tenure.ErrClosed) {
				t.Errorf("k%d after Close: cause %v, want ErrClosed", i, context.Cause(l.Context()))
			}
		}
		if rec, _ := mem.Get(context.Background(), "k0"); !rec.Held() {
			t.Error("k0 released before its leadership was resigned")
		}
		resignAll(ls)
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close after every Resign: %v", err)
		}
		if rec, _ := mem.Get(context.Background(), "k0"); rec.Held() {
			t.Errorf("k0 after Close: %+v, want free", rec)
		}
		if _, err := s.Campaign(context.Background(), "k0", "p1", ""); !errors.Is(err, tenure.ErrClosed) {
			t.Errorf("Campaign after Close: %v, want ErrClosed", err)
		}
	})
}

// slowSessions is a memory store whose session Acquires take 100 ms and
// count how many were under way at once.
type slowSessions struct {
	*memory.Store
	inflight, most atomic.Int64
}

func (s *slowSessions) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	ss, err := s.Store.OpenSession(ctx, ttl)
	return &slowSession{StoreSession: ss, s: s}, err
}

type slowSession struct {
	tenure.StoreSession
	s *slowSessions
}

func (ss *slowSession) Acquire(ctx context.Context, key, id, value string) (tenure.Lease, error) {
	n := ss.s.inflight.Add(1)
	defer ss.s.inflight.Add(-1)
	for m := ss.s.most.Load(); n > m && !ss.s.most.CompareAndSwap(m, n); m = ss.s.most.Load() {
	}
	time.Sleep(100 * time.Millisecond)
	return ss.StoreSession.Acquire(ctx, key, id, value)
}

// A burst of campaigns waits for the session's Acquire slots rather than
// queueing thousands of requests in the store ahead of its keep-alives.
func TestCampaignBurstIsBoundedByMaxAcquires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &slowSessions{Store: memory.New(nil)}
		s, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: ttl, MaxAcquires: 3, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ls := campaignAtOnce(t, s, 20)
		if m := st.most.Load(); m != 3 {
			t.Errorf("at most %d Acquires under way at once, want MaxAcquires (3)", m)
		}
		resignAll(ls)
		mustClose(t, s)
	})
	if _, err := tenure.NewSession(tenure.SessionConfig{Store: memory.New(nil), MaxAcquires: -1}); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("MaxAcquires -1: %v, want ErrInvalid", err)
	}
}

// TestCampaignOfAKeyTheSessionLeadsWaitsForResign: a second Campaign of a
// key that a Leadership of the same session and identity holds waits for
// its Resign, as for any holder. It must neither release the key under
// the leadership (which its keep-alives would then never report lost) nor
// lead a second term beside it.
func TestCampaignOfAKeyTheSessionLeadsWaitsForResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		s := newSession(t, mem)
		first, err := s.Campaign(context.Background(), "job", "p1", "")
		if err != nil {
			t.Fatal(err)
		}
		got := campaignInBackground(t, s, "job", "p1")
		time.Sleep(3 * ttl)
		synctest.Wait()
		select {
		case l := <-got:
			t.Errorf("second Campaign led term %d while term %d led (its context: %v)",
				l.Lease().Term, first.Lease().Term, context.Cause(first.Context()))
			resignAll([]*tenure.Leadership{first, l})
			mustClose(t, s)
			return
		default:
		}
		if err := first.Context().Err(); err != nil {
			t.Errorf("the first leadership ended: %v", context.Cause(first.Context()))
		}
		if r, _ := mem.Get(context.Background(), "job"); r.Holder != "p1" || r.Term != first.Lease().Term {
			t.Errorf("the key's record is %+v while term %d leads, want it held by p1", r, first.Lease().Term)
		}
		resigned := time.Now()
		first.Resign(context.Background())
		second := <-got
		if d := time.Since(resigned); d > 0 {
			t.Errorf("second Campaign took %s after the Resign, want at once (it watches the key)", d)
		}
		if second.Lease().Term <= first.Lease().Term {
			t.Errorf("second term %d, want above %d", second.Lease().Term, first.Lease().Term)
		}
		second.Resign(context.Background())
		mustClose(t, s)
	})
}

// TestElectorsOfOneKeyInOneSessionTakeTurns: two electors of the same key
// and identity in one session never run their tasks at once; each term
// is led by one of them.
func TestElectorsOfOneKeyInOneSessionTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSession(t, memory.New(nil))
		ctx, cancel := context.WithTimeout(context.Background(), 5*ttl)
		var running, most, terms atomic.Int32
		var wg sync.WaitGroup
		for range 2 {
			e := sessionElector(t, s, "job")
			wg.Go(func() {
				_ = e.Run(ctx, func(ctx context.Context) error {
					n := running.Add(1)
					defer running.Add(-1)
					terms.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					select {
					case <-ctx.Done():
					case <-time.After(ttl / 2):
					}
					return nil
				})
			})
		}
		wg.Wait()
		cancel()
		if most.Load() > 1 || terms.Load() < 2 {
			t.Errorf("%d terms, at most %d tasks at once; want turns, one task at a time", terms.Load(), most.Load())
		}
		mustClose(t, s)
	})
}

// campaignInBackground runs s.Campaign(key, id) in a goroutine and sends
// its Leadership (nil if it failed, which fails t) on the returned channel.
func campaignInBackground(t *testing.T, s *tenure.Session, key, id string) <-chan *tenure.Leadership {
	got := make(chan *tenure.Leadership)
	go func() {
		l, err := s.Campaign(context.Background(), key, id, "")
		if err != nil {
			t.Errorf("Campaign(%q, %q) in the background: %v", key, id, err)
		}
		got <- l
	}()
	return got
}
