package raft

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// TestStepDownThroughObserver: raft members from peer URLs with electors
// with leadership control; an observer asks the leader to step down to a
// named member: the leader's task ends with ErrSteppedDown, and the named
// member's task starts next, in a higher term, with no overlap. A request
// naming nobody then moves leadership to another member.
func TestStepDownThroughObserver(t *testing.T) {
	c, urls := openPeerCluster(t, 3)
	sp, ctx := newSpans(t)
	defer sp.stop()
	for _, n := range c.nodes {
		el, err := tenure.New(tenure.Config{Store: n, Key: "job", Control: &tenure.Control{Priority: tenure.DefaultPriority}})
		if err != nil {
			t.Fatal(err)
		}
		sp.run(ctx, el)
	}
	next := sp.next
	obs := openTestObserver(t, observerURL(t, urls[0], ""))
	first := next(true)
	to := "1"
	if first.id == "1" {
		to = "2"
	}
	sd, err := tenure.RequestStepDown(ctx, obs, "job", tenure.StepDownRequest{To: to, Window: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if sd.Leader.Holder != first.id {
		t.Fatalf("the request was made against %+v, want leader %s", sd.Leader, first.id)
	}
	if e := next(false); e.id != first.id || !errors.Is(e.cause, tenure.ErrSteppedDown) {
		t.Fatalf("task of %s ended with %v; want %s with ErrSteppedDown", e.id, e.cause, first.id)
	}
	second := next(true)
	if second.id != to || second.term <= first.term {
		t.Fatalf("after the step-down %s leads term %d; want %s above term %d", second.id, second.term, to, first.term)
	}

	if _, err := tenure.RequestStepDown(ctx, obs, "job", tenure.StepDownRequest{Window: time.Second}); err != nil {
		t.Fatal(err)
	}
	if e := next(false); e.id != to || !errors.Is(e.cause, tenure.ErrSteppedDown) {
		t.Fatalf("task of %s ended with %v; want %s with ErrSteppedDown", e.id, e.cause, to)
	}
	if third := next(true); third.id == to || third.term <= second.term {
		t.Fatalf("after a step-down naming nobody %s leads term %d; want another member above term %d", third.id, third.term, second.term)
	}
	if n := sp.overlaps.Load(); n != 0 {
		t.Fatalf("%d times two tasks ran at once", n)
	}

	// Refused: a term nobody leads, a target outside the cluster.
	if _, err := tenure.RequestStepDown(ctx, obs, "job", tenure.StepDownRequest{Term: 1 << 40}); err == nil {
		t.Fatal("a request for a term nobody leads was taken")
	}
	if _, err := tenure.RequestStepDown(ctx, obs, "job", tenure.StepDownRequest{To: strconv.Itoa(9)}); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("a target outside the cluster: %v, want ErrInvalid", err)
	}
}

// span is a task's start or end.
type span struct {
	id    string
	term  uint64
	start bool
	cause error
}

// spans runs several electors and records the starts and ends of their
// tasks, counting the times two ran at once.
type spans struct {
	t                 *testing.T
	running, overlaps atomic.Int32
	ch                chan span
	cancel            context.CancelFunc
	wg                sync.WaitGroup
}

// newSpans returns spans for t, and the context its electors run in until
// [spans.stop].
func newSpans(t *testing.T) (*spans, context.Context) {
	ctx, cancel := context.WithCancel(context.Background())
	return &spans{t: t, ch: make(chan span, 32), cancel: cancel}, ctx
}

// run runs el in ctx, with the task that records its spans.
func (sp *spans) run(ctx context.Context, el *tenure.Elector) {
	sp.wg.Go(func() { el.Run(ctx, sp.task) })
}

// stop ends the context of the electors and waits for every run to
// return. Deferred by the tests, it stops them before t's cleanups close
// their stores.
func (sp *spans) stop() {
	sp.cancel()
	sp.wg.Wait()
}

// task is the electors' task: it runs until its context ends.
func (sp *spans) task(ctx context.Context) error {
	if sp.running.Add(1) > 1 {
		sp.overlaps.Add(1)
	}
	l, _ := tenure.LeaseFrom(ctx)
	sp.ch <- span{l.Identity, l.Term, true, nil}
	<-ctx.Done()
	sp.running.Add(-1)
	sp.ch <- span{l.Identity, l.Term, false, context.Cause(ctx)}
	return nil
}

// next returns the next start (or end) of a task, failing after 30 s.
func (sp *spans) next(start bool) span {
	sp.t.Helper()
	for {
		select {
		case s := <-sp.ch:
			if s.start == start {
				return s
			}
		case <-time.After(30 * time.Second):
			sp.t.Fatalf("no task start=%t within 30s", start)
		}
	}
}

// FuzzDecodeStepDown: the member's decoder of step-down request lines
// never panics, and whatever it accepts has a term, a window in range and
// a decimal target or none.
func FuzzDecodeStepDown(f *testing.F) {
	for _, s := range []string{
		`{"term":7,"to":"2","window_ms":10000}`,
		`{"term":7,"window_ms":100}`,
		`{"term":0,"window_ms":100}`,
		`{"term":7,"to":"x","window_ms":100}`,
		`{"term":7,"window_ms":100,"extra":1}`,
		`{"term":7,"window_ms":100}{}`,
		`{"term":18446744073709551615,"window_ms":86400000}`,
		`[]`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeStepDown(b)
		if err != nil {
			return
		}
		w := time.Duration(r.WindowMS) * time.Millisecond
		if r.Term == 0 || w < tenure.MinTTL || w > tenure.MaxTTL {
			t.Fatalf("%q decoded to %+v", b, r)
		}
		if r.To != "" {
			if _, err := strconv.ParseUint(r.To, 10, 64); err != nil {
				t.Fatalf("%q decoded to target %q", b, r.To)
			}
		}
	})
}
