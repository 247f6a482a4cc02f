package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
)

// TestRunBacksOffWhileTheTaskFails: each term whose task fails while
// leading doubles the wait before the next campaign, up to the TTL; a term
// whose task succeeds ends the backoff.
func TestRunBacksOffWhileTheTaskFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := config(memory.New(nil), "a")
		e := newElector(t, cfg)
		cfg = e.Config()
		boom := errors.New("boom")
		const failing = 6
		var starts []time.Time
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := e.Run(ctx, func(ctx context.Context) error {
			starts = append(starts, time.Now())
			switch n := len(starts); {
			case n <= failing:
				return boom
			case n == failing+2:
				return tenure.Last(nil)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run = %v, want the last task's nil", err)
		}
		if len(starts) != failing+2 {
			t.Fatalf("%d terms, want %d", len(starts), failing+2)
		}
		for i := 1; i < len(starts); i++ {
			// The wait after term i (1-based) follows i consecutive failures,
			// or none after a success.
			failures := min(i, failing)
			if i > failing {
				failures = 0
			}
			lo := min(cfg.RetryInterval<<failures, cfg.TTL)
			hi := time.Duration(float64(lo) * cfg.Jitter)
			if gap := starts[i].Sub(starts[i-1]); gap < lo || gap >= hi {
				t.Errorf("wait after term %d (%d failures in a row) = %s, want in [%s, %s)", i, failures, gap, lo, hi)
			}
		}
	})
}

// TestRunLastEndsRunWithTheTasksResult: a task that returns Last(err)
// finishes its term still leading, and Run releases the lease and returns
// err instead of campaigning again.
func TestRunLastEndsRunWithTheTasksResult(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		e := newElector(t, config(mem, "a"))
		boom := errors.New("boom")
		runs := 0
		err := e.Run(context.Background(), func(ctx context.Context) error {
			runs++
			time.Sleep(3 * ttl) // across renewals: still leading
			if ctx.Err() != nil {
				t.Errorf("leader context done before the task returned: %v", context.Cause(ctx))
			}
			return tenure.Last(boom)
		})
		if err != boom || runs != 1 {
			t.Fatalf("Run = %v after %d terms, want boom after 1", err, runs)
		}
		if r, _ := mem.Get(context.Background(), "job"); r.Held() {
			t.Fatalf("lease still held after Run returned: %+v", r)
		}
	})
}

// TestDoReportsTheTasksResult: Do removes Last, and when leadership ended
// before the task returned its error matches both the cause and the task's
// own error.
func TestDoReportsTheTasksResult(t *testing.T) {
	boom := errors.New("boom")
	t.Run("Last", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newElector(t, config(memory.New(nil), "a"))
			err := e.Do(context.Background(), func(context.Context) error { return tenure.Last(boom) })
			if err != boom {
				t.Fatalf("Do = %v, want boom itself", err)
			}
		})
	})
	t.Run("lost first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := faultstore.New(faultstore.Plan{})
			e := newElector(t, config(faultstore.Wrap(memory.New(nil), f), "a"))
			err := e.Do(context.Background(), func(ctx context.Context) error {
				f.Partition(faultstore.FailFast)
				<-ctx.Done()
				return boom
			})
			if !errors.Is(err, tenure.ErrRenewDeadline) || !errors.Is(err, boom) {
				t.Fatalf("Do = %v, want ErrRenewDeadline and the task's boom", err)
			}
		})
	})
}

// exhaustedStore is a store whose every Acquire fails as a store does once
// the key's term is the largest it can hold.
type exhaustedStore struct {
	tenure.Store
	acquires int
}

func (s *exhaustedStore) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	s.acquires++
	return tenure.Lease{}, fmt.Errorf("%w: key %q: term 18446744073709551615 is the largest there is", tenure.ErrTermsExhausted, key)
}

// TestRunEndsWhenTermsAreExhausted: an Acquire that fails with
// ErrTermsExhausted is not retried (only an operator can repair the key's
// record): Run returns it at once, so `tenure run` exits saying why
// instead of logging the same failure every few seconds for ever.
func TestRunEndsWhenTermsAreExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &exhaustedStore{Store: memory.New(nil)}
		e := newElector(t, config(st, "a"))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // of the bubble's fake time
		defer cancel()
		err := e.Run(ctx, func(ctx context.Context) error {
			t.Error("the task ran without a grant")
			return nil
		})
		if !errors.Is(err, tenure.ErrTermsExhausted) || st.acquires != 1 {
			t.Fatalf("Run = %v after %d acquires; want ErrTermsExhausted after one", err, st.acquires)
		}
	})
}

// exhaustedSessions is a memory store whose sessions refuse key "x" as a
// store does once the key's term is the largest it can hold.
type exhaustedSessions struct {
	*memory.Store
	acquires atomic.Int64 // of "x"
}

func (s *exhaustedSessions) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	ss, err := s.Store.OpenSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return &exhaustedSession{StoreSession: ss, s: s}, nil
}

type exhaustedSession struct {
	tenure.StoreSession
	s *exhaustedSessions
}

func (ss *exhaustedSession) Acquire(ctx context.Context, key, identity, value string) (tenure.Lease, error) {
	if key == "x" {
		ss.s.acquires.Add(1)
		return tenure.Lease{}, fmt.Errorf("%w: key %q: term 18446744073709551615 is the largest there is", tenure.ErrTermsExhausted, key)
	}
	return ss.StoreSession.Acquire(ctx, key, identity, value)
}

// TestCampaignEndsWhenTermsAreExhausted: as TestRunEndsWhenTermsAreExhausted,
// for a Session's Campaign: it returns ErrTermsExhausted after one Acquire,
// and the session's other keys are led as usual.
func TestCampaignEndsWhenTermsAreExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &exhaustedSessions{Store: memory.New(nil)}
		s, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: 10 * time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // of the bubble's fake time
		defer cancel()
		if _, err := s.Campaign(ctx, "x", "a", ""); !errors.Is(err, tenure.ErrTermsExhausted) || st.acquires.Load() != 1 {
			t.Fatalf("Campaign = %v after %d acquires; want ErrTermsExhausted after one", err, st.acquires.Load())
		}
		l, err := s.Campaign(ctx, "y", "a", "")
		if err != nil {
			t.Fatalf("Campaign of another key: %v", err)
		}
		l.Resign(context.Background())
	})
}
