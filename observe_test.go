package tenure_test

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
)

const observerPoll = 100 * time.Millisecond

func TestObserverChanges(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(map[bool]string{true: "watch", false: "poll"}[watch], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testObserverChanges(t, watch) })
		})
	}
}

// seer reads an observer's changes and checks each one.
type seer struct {
	t   *testing.T
	ch  <-chan tenure.Record
	lag time.Duration // how late a change may be seen
}

func (s seer) next(what string, holder string, term uint64, at time.Time) {
	s.t.Helper()
	r, ok := <-s.ch
	if !ok {
		s.t.Fatalf("%s: channel closed", what)
	}
	if r.Holder != holder || r.Term != term {
		s.t.Fatalf("%s: got holder %q term %d, want %q term %d", what, r.Holder, r.Term, holder, term)
	}
	if late := time.Since(at); late < 0 || late > s.lag+time.Millisecond {
		s.t.Fatalf("%s: seen %s after it happened, want within %s", what, late, s.lag)
	}
}

func testObserverChanges(t *testing.T, watch bool) {
	mem := memory.New(nil)
	f := faultstore.New(faultstore.Plan{})
	var store tenure.Store = faultstore.Wrap(mem, f)
	lag := time.Duration(0)
	if !watch {
		store = faultstore.PollOnly(store)
		lag = observerPoll
	}
	o := &tenure.Observer{Store: store, Key: "job", Poll: observerPoll, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	ch := o.Changes(ctx)
	s := seer{t, ch, lag}
	bg := context.Background()
	s.next("initial record", "", 0, time.Now())

	time.Sleep(time.Second)
	la, err := mem.Acquire(bg, "job", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	s.next("acquire", "a", 1, time.Now())

	time.Sleep(ttl / 2)
	if err := mem.Release(bg, la); err != nil {
		t.Fatal(err)
	}
	s.next("release", "", 1, time.Now())

	time.Sleep(time.Second)
	if _, err := mem.Acquire(bg, "job", "b", ttl); err != nil {
		t.Fatal(err)
	}
	expiry := time.Now().Add(ttl)
	s.next("acquire by b", "b", 2, time.Now())
	// b crashes: its grant expires without a release.
	s.next("expiry", "", 2, expiry)

	// Store errors are retried: a holder that came and went during a
	// partition is missed, the one after it is seen.
	f.Partition(faultstore.FailFast)
	time.Sleep(3 * observerPoll)
	if _, err := mem.Acquire(bg, "job", "c", time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * observerPoll)
	f.Heal()
	healed := time.Now()
	r := <-ch
	if r.Holder != "c" || r.Term != 3 || time.Since(healed) > observerPoll+time.Millisecond {
		t.Fatalf("after the partition: %+v %s after the heal, want holder c term 3 within %s", r, time.Since(healed), observerPoll)
	}

	lr, err := o.Current(bg)
	if err != nil || lr.Holder != "c" {
		t.Fatalf("Current = %+v, %v", lr, err)
	}

	cancel()
	for r := range ch {
		t.Fatalf("record after cancel: %+v", r)
	}
}

func TestObserverBadKey(t *testing.T) {
	o := &tenure.Observer{Store: memory.New(nil), Key: ""}
	if _, err := o.Current(context.Background()); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Leader with an empty key = %v, want ErrInvalid", err)
	}
}

// A watch whose setup hangs must not keep the observer from reporting.
func TestObserverHangingWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		f := faultstore.New(faultstore.Plan{Rates: faultstore.Rates{Ops: faultstore.OpWatch, DelayBefore: 1, MaxDelay: 1000 * time.Hour}, Seed: 3})
		o := &tenure.Observer{Store: faultstore.Wrap(mem, f), Key: "job", Poll: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := o.Changes(ctx)
		select {
		case <-ch:
		case <-time.After(10 * ttl):
			t.Fatal("no initial record within 10 TTLs: stuck setting up a watch")
		}
		cancel()
		for range ch {
		}
	})
}

// lateWatch is a store whose watch delivers, after the observer's Get, a
// record older than it: what a watch's first delivery looks like when it
// was read before a grant that the following Get already saw.
type lateWatch struct {
	tenure.Store
	stale chan tenure.Record
}

func (s lateWatch) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	return s.stale, nil
}

func TestObserverNeverGoesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		l, err := mem.Acquire(context.Background(), "job", "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		st := lateWatch{mem, make(chan tenure.Record, 2)}
		o := &tenure.Observer{Store: st, Key: "job", Poll: time.Second, Logger: slog.New(slog.DiscardHandler)}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := o.Changes(ctx)
		if r := <-ch; r.Holder != "a" || r.Term != l.Term {
			t.Fatalf("first = %+v, want a at term %d", r, l.Term)
		}
		st.stale <- tenure.Record{Key: "job"} // term 0: before the grant
		st.stale <- tenure.Record{Key: "job", Holder: "b", Term: l.Term + 1, TTL: time.Minute, Remaining: time.Minute}
		if r := <-ch; r.Holder != "b" || r.Term != l.Term+1 {
			t.Fatalf("after a stale and a fresh delivery: %+v, want b at term %d (the stale one skipped)", r, l.Term+1)
		}
	})
}

// getCounter counts the Gets made through it.
type getCounter struct {
	tenure.Store
	gets atomic.Int64
}

func (g *getCounter) Get(ctx context.Context, key string) (tenure.Record, error) {
	g.gets.Add(1)
	return g.Store.Get(ctx, key)
}

// TestObserverDoesNotReadWhileTheHolderRenews: over a store's watch, which
// delivers expiries itself, an observer reads nothing while the holder
// renews; it once re-read at every expiry the holder's renewals had
// pushed back, about once per TTL.
func TestObserverDoesNotReadWhileTheHolderRenews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		store := &getCounter{Store: mem}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		const ttl = 10 * time.Second
		l, err := mem.Acquire(ctx, "job", "a", ttl)
		if err != nil {
			t.Fatal(err)
		}
		o := &tenure.Observer{Store: store, Key: "job", Logger: slog.New(slog.DiscardHandler)}
		ch := o.Changes(ctx)
		if r := <-ch; r.Holder != "a" {
			t.Fatalf("first record %+v, want a leading", r)
		}
		synctest.Wait()
		before := store.gets.Load()
		for range 30 { // 10 TTLs, renewed every third of one
			time.Sleep(ttl / 3)
			if err := mem.Renew(ctx, l); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		if n := store.gets.Load() - before; n != 0 {
			t.Errorf("the observer made %d Gets in 10 TTLs of renewals, want none", n)
		}
		mem.Release(ctx, l)
		if r := <-ch; r.Held() {
			t.Errorf("after the release: %+v, want the key free", r)
		}
	})
}
