package raft

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
)

// taskSpan is one run of a leader task.
type taskSpan struct {
	node       int
	term       uint64
	start, end time.Time
	cause      error
}

// electors runs a tenure elector on every member of c, each running a task
// that records its span. Spans arrive on the returned channel when tasks
// start (end zero) and again when they end.
func electors(t *testing.T, ctx context.Context, c *cluster) (chan taskSpan, *sync.WaitGroup) {
	spans := make(chan taskSpan, 64)
	var wg sync.WaitGroup
	for i := range c.ids {
		e, err := tenure.New(tenure.Config{
			Store: c.node(i), Key: "k", Identity: c.ids[i],
			TTL:    c.hb, // at most the heartbeat timeout: see Node.Acquire
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			e.Run(ctx, func(lctx context.Context) error {
				l, _ := tenure.LeaseFrom(lctx)
				s := taskSpan{node: i, term: l.Term, start: time.Now()}
				spans <- s
				<-lctx.Done()
				s.end, s.cause = time.Now(), context.Cause(lctx)
				spans <- s
				return nil
			})
		})
	}
	return spans, &wg
}

// A leader cut off into a minority has its task cancelled (ErrLost or
// ErrRenewDeadline) before the majority's new leader starts its task, in a
// higher term.
func TestElectorLeaderPartitionedAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 5, testHB)
		ctx, cancel := context.WithCancel(context.Background())
		spans, wg := electors(t, ctx, c)

		first := <-spans
		if first.end != (time.Time{}) {
			t.Fatalf("first span already ended: %+v", first)
		}
		g := make([]int, 5)
		g[first.node], g[(first.node+1)%5] = 1, 1
		c.partition(g)
		cut := time.Now()

		var ended, next taskSpan
		for ended.end.IsZero() || next.start.IsZero() {
			s := <-spans
			switch {
			case s.node == first.node && !s.end.IsZero():
				ended = s
			case s.node != first.node && s.end.IsZero():
				if g[s.node] != 0 {
					t.Fatalf("a task started on member %d, on the minority side", s.node)
				}
				next = s
			default:
				t.Fatalf("unexpected span %+v", s)
			}
		}
		if !errors.Is(ended.cause, tenure.ErrLost) && !errors.Is(ended.cause, tenure.ErrRenewDeadline) {
			t.Fatalf("old leader's task ended with %v, want ErrLost or ErrRenewDeadline", ended.cause)
		}
		if next.start.Before(ended.end) {
			t.Fatalf("new leader's task started at +%s, before the old one was cancelled at +%s",
				next.start.Sub(cut), ended.end.Sub(cut))
		}
		if next.term <= first.term {
			t.Fatalf("new term %d not above %d", next.term, first.term)
		}
		t.Logf("old task cancelled %s after the cut (%v); new task started %s after the cut",
			ended.end.Sub(cut), ended.cause, next.start.Sub(cut))
		cancel()
		wg.Wait()
	})
}

// Under a seeded churn of partitions and leader crashes with electors on
// top, two leader tasks never run at the same time.
func TestElectorTasksNeverOverlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 5, testHB)
		ctx, cancel := context.WithCancel(context.Background())
		spans, wg := electors(t, ctx, c)
		var mu sync.Mutex
		var all []taskSpan
		collected := make(chan struct{})
		go func() {
			defer close(collected)
			for s := range spans {
				if !s.end.IsZero() {
					mu.Lock()
					all = append(all, s)
					mu.Unlock()
				}
			}
		}()
		for step := range 12 {
			time.Sleep(7 * testHB)
			g := make([]int, 5)
			g[step%5], g[(step+2)%5] = 1, 1
			if step%3 == 2 {
				c.heal()
			} else {
				c.partition(g)
			}
		}
		c.heal()
		time.Sleep(10 * testHB)
		cancel()
		wg.Wait()
		close(spans)
		<-collected
		if len(all) < 3 {
			t.Fatalf("only %d leader terms ran", len(all))
		}
		for i, a := range all {
			for _, b := range all[i+1:] {
				if a.start.Before(b.end) && b.start.Before(a.end) {
					t.Errorf("tasks overlap: member %d term %d [%s, %s] and member %d term %d [%s, %s]",
						a.node, a.term, a.start.Format(time.StampMilli), a.end.Format(time.StampMilli),
						b.node, b.term, b.start.Format(time.StampMilli), b.end.Format(time.StampMilli))
				}
			}
		}
		t.Logf("%d leader terms, none overlapping", len(all))
	})
}
