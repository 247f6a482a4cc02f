package tenure_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// downStore is a store that, while down is set, fails every Get and Watch
// as a server that cannot be reached does; going down (fail) ends the
// watches set up before, as a lost connection does.
type downStore struct {
	tenure.Store
	down atomic.Bool
	mu   sync.Mutex
	cut  chan struct{} // closed by fail
}

func (s *downStore) fail() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down.Store(true)
	if s.cut != nil {
		close(s.cut)
		s.cut = nil
	}
}

var errDown = errors.New("connection refused")

func (s *downStore) Get(ctx context.Context, key string) (tenure.Record, error) {
	if s.down.Load() {
		return tenure.Record{}, errDown
	}
	return s.Store.Get(ctx, key)
}

func (s *downStore) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down.Load() {
		return nil, errDown
	}
	if s.cut == nil {
		s.cut = make(chan struct{})
	}
	in, err := s.Store.Watch(ctx, key)
	if err != nil {
		return nil, err
	}
	out, cut := make(chan tenure.Record), s.cut
	go func() {
		defer close(out)
		for {
			select {
			case r, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- r:
				case <-cut:
					return
				}
			case <-cut:
				return
			}
		}
	}()
	return out, nil
}

// warnings is a slog.Handler that keeps the records logged to it.
type warnings struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (w *warnings) Enabled(context.Context, slog.Level) bool { return true }
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler       { return w }
func (w *warnings) WithGroup(string) slog.Handler            { return w }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, r)
	return nil
}

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.recs)
}

// TestObserverWarnsOfAStoreDownOncePerMinute: an observer of a store that
// stays down logs its failures at once, then once a minute with the number
// of repeats left out, not at every poll; once the store answers again, its
// next failure is logged at once. It used to log two lines a second (the
// watch and the read) for as long as the store was down: tenure watch,
// tenure prefer and every --http view filled their logs.
func TestObserverWarnsOfAStoreDownOncePerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &downStore{Store: memory.New(nil)}
		st.fail()
		logs := &warnings{}
		o := &tenure.Observer{Store: st, Key: "job", Poll: time.Second, Logger: slog.New(logs)}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := o.Changes(ctx)
		time.Sleep(10*time.Minute + time.Second/2)
		synctest.Wait()
		// The first watch and read failures, then one of each a minute.
		if n := logs.count(); n < 2 || n > 2*11 {
			t.Fatalf("%d warnings over 10 minutes of polling every second; want about 2 a minute", n)
		}
		logs.mu.Lock()
		last := logs.recs[len(logs.recs)-1]
		logs.mu.Unlock()
		repeated := int64(0)
		last.Attrs(func(a slog.Attr) bool {
			if a.Key == "repeated" {
				repeated = a.Value.Int64()
			}
			return true
		})
		if repeated < 50 {
			t.Errorf("the last warning %q says %d repeats were left out; want the minute's, about 59", last.Message, repeated)
		}
		st.down.Store(false)
		<-ch // the store answers
		before := logs.count()
		st.fail()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if logs.count() == before {
			t.Fatal("a failure after the store answered again was not logged at once")
		}
		cancel()
		for range ch {
		}
	})
}
