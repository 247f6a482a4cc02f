package tenure_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// batchSessions is a memory store whose sessions acquire in batches that
// take 100 ms each, recording the size of every batch.
type batchSessions struct {
	*memory.Store
	mu    sync.Mutex
	sizes []int
}

func (s *batchSessions) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	ss, err := s.Store.OpenSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return &batchSession{StoreSession: ss, s: s}, nil
}

func (s *batchSessions) batches() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.sizes...)
}

type batchSession struct {
	tenure.StoreSession
	s *batchSessions
}

func (ss *batchSession) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	ss.s.mu.Lock()
	ss.s.sizes = append(ss.s.sizes, len(reqs))
	ss.s.mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	return ss.StoreSession.(tenure.BatchAcquirer).AcquireBatch(ctx, reqs)
}

// Campaigns that wait at the same time share store requests: the first
// goes alone, the rest, gathered while it was under way, in one batch.
func TestCampaignsAcquireInBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchSessions{Store: memory.New(nil)}
		s := newSession(t, st)
		const n = 40
		ls := campaignAtOnce(t, s, n)
		terms := map[string]uint64{}
		for _, l := range ls {
			terms[l.Lease().Key] = l.Lease().Term
		}
		sizes, sum := st.batches(), 0
		for _, k := range sizes {
			sum += k
		}
		if len(terms) != n || sum != n || len(sizes) > 2 {
			t.Errorf("%d keys led with %d acquires in batches %v, want %d keys in at most 2 batches", len(terms), sum, sizes, n)
		}
		resignAll(ls)
		mustClose(t, s)
	})
}

// Two campaigns for one key never go in one batch: the second waits for
// the next, and finds the key held by the first.
func TestBatchHoldsOneRequestPerKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &batchSessions{Store: memory.New(nil)}
		s := newSession(t, st)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		type res struct {
			l   *tenure.Leadership
			err error
		}
		got := make(chan res, 3)
		for _, k := range []string{"k", "k", "other"} {
			go func() {
				l, err := s.Campaign(ctx, k, "p1", "")
				got <- res{l, err}
			}()
		}
		first, second := <-got, <-got
		synctest.Wait()
		if first.err != nil || second.err != nil {
			t.Fatalf("Campaigns: %v, %v", first.err, second.err)
		}
		if first.l.Lease().Key == second.l.Lease().Key {
			t.Fatalf("two leaderships of %q at once", first.l.Lease().Key)
		}
		for _, k := range st.batches() {
			if k > 2 {
				t.Errorf("batches %v: one has the same key twice", st.batches())
			}
		}
		// The other campaign for "k" waits; it leads once "k" is resigned.
		for _, r := range []res{first, second} {
			if r.l.Lease().Key == "k" {
				r.l.Resign(context.Background())
			}
		}
		third := <-got
		if third.err != nil || third.l.Lease().Key != "k" {
			t.Fatalf("the waiting campaign: %v, %v", third.l, third.err)
		}
		resignAll([]*tenure.Leadership{first.l, second.l, third.l})
		_ = s.Close(context.Background())
	})
}

// A campaign that stops waiting while its batch is under way does not
// leave its grant held: the session gives it back.
func TestBatchGivesBackTheGrantOfACampaignThatLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		st := &batchSessions{Store: mem}
		s := newSession(t, st)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if l, err := s.Campaign(ctx, "k", "p1", ""); err == nil {
			t.Fatalf("Campaign led %v although its ctx ended during the batch", l.Lease())
		}
		time.Sleep(100 * time.Millisecond) // the batch returns
		synctest.Wait()
		r, err := mem.Get(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if r.Held() {
			t.Errorf("key still held after its campaign left: %+v", r)
		}
		_ = s.Close(context.Background())
	})
}
