package raft

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
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

// TestStepDownTargetGoneFreesTheKey: member A leads, a step-down names X
// with a window of 10 s, X takes over and then crashes. Raft can only
// re-elect A (the third member has priority 0 and hands leadership away).
// The window used to keep serving the request on A's node, so A's
// elector held back until it ended: the key stayed unled for the rest of
// the window (about 6 s seen with tenure run members and a 10 s window).
// The request is done once raft's term moved past the one asked to step
// down: A's task starts within a few election timeouts, in a higher term
// than X's, and no two tasks ever overlap.
func TestStepDownTargetGoneFreesTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const hb = 200 * time.Millisecond
		c, sp, ctx, first := twoElectorsLead(t, hb)
		defer sp.stop()
		a := slices.Index(c.ids, first.id)
		x := 1 - a
		const window = 10 * time.Second
		if _, err := tenure.RequestStepDown(ctx, c.node(a), "job", tenure.StepDownRequest{To: c.ids[x], Window: window}); err != nil {
			t.Fatal(err)
		}
		second := sp.next(true)
		if second.id != c.ids[x] || second.term <= first.term {
			t.Fatalf("after the step-down %s leads term %d; want %s above term %d", second.id, second.term, c.ids[x], first.term)
		}
		crashed := time.Now()
		c.crash(x)
		third := sp.next(true)
		if third.id != c.ids[a] || third.term <= second.term {
			t.Fatalf("after %s crashed %s leads term %d; want %s above term %d", c.ids[x], third.id, third.term, c.ids[a], second.term)
		}
		took := time.Since(crashed)
		t.Logf("%s led again %s after %s crashed", c.ids[a], took, c.ids[x])
		if took > window/2 {
			t.Fatalf("%s led again %s after the step-down's target crashed; want well within the %s window", c.ids[a], took, window)
		}
		if n := sp.overlaps.Load(); n != 0 {
			t.Fatalf("%d times two tasks ran at once", n)
		}
	})
}

// TestStepDownTargetDownHandsToAnother: member A leads, member X is down,
// and a step-down names X, or nobody, with a window of 10 s. The hand-over
// to X, or to raft's own pick (X, as up to date as the third member),
// fails, and A, still raft leader of the term it may not grant again,
// used to try the same member again and again: the key stayed unled for
// over 30 s (beyond the window: raft's pick after it was X again). Now a
// failed hand-over goes to another member: raft moves to a new term (the
// third member, of priority 0, hands it back to A) and A's task starts
// again within a few election timeouts.
func TestStepDownTargetDownHandsToAnother(t *testing.T) {
	for _, named := range []bool{true, false} {
		t.Run(fmt.Sprintf("named=%t", named), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { stepDownTargetDown(t, named) })
		})
	}
}

func stepDownTargetDown(t *testing.T, named bool) {
	const hb = 200 * time.Millisecond
	c, sp, ctx, first := twoElectorsLead(t, hb)
	defer sp.stop()
	a := slices.Index(c.ids, first.id)
	x := 1 - a
	c.crash(x)
	const window = 10 * time.Second
	req := tenure.StepDownRequest{Window: window}
	if named {
		req.To = c.ids[x]
	}
	asked := time.Now()
	if _, err := tenure.RequestStepDown(ctx, c.node(a), "job", req); err != nil {
		t.Fatal(err)
	}
	if e := sp.next(false); e.id != first.id || !errors.Is(e.cause, tenure.ErrSteppedDown) {
		t.Fatalf("task of %s ended with %v; want %s stepping down", e.id, e.cause, first.id)
	}
	second := sp.next(true)
	took := time.Since(asked)
	t.Logf("%s led again %s after the step-down (to %q), %s being down", second.id, took, req.To, c.ids[x])
	if second.id != first.id || second.term <= first.term {
		t.Fatalf("after the step-down %s leads term %d; want %s above term %d", second.id, second.term, first.id, first.term)
	}
	if took > window/2 {
		t.Fatalf("%s led again %s after the step-down (to %q), %s being down; want well within the %s window", first.id, took, req.To, c.ids[x], window)
	}
	if n := sp.overlaps.Load(); n != 0 {
		t.Fatalf("%d times two tasks ran at once", n)
	}
}

// twoElectorsLead starts a 3-member cluster whose third member never
// leads, and an elector on key job on each of the other two, and returns
// once one of them leads, with its span. The caller stops sp.
func twoElectorsLead(t *testing.T, hb time.Duration) (*cluster, *spans, context.Context, span) {
	t.Helper()
	c := newPriorityCluster(t, 3, hb, map[int]int{2: tenure.NeverLead})
	sp, ctx := newSpans(t)
	for i := range 2 {
		el, err := tenure.New(tenure.Config{Store: c.node(i), Key: "job", TTL: hb, Logger: slog.New(slog.DiscardHandler),
			Control: &tenure.Control{Priority: tenure.DefaultPriority}})
		if err != nil {
			sp.stop()
			t.Fatal(err)
		}
		sp.run(ctx, el)
	}
	return c, sp, ctx, sp.next(true)
}
