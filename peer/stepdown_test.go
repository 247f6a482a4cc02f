package peer_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	_ "github.com/tenurehq/tenure/peer/bully"
	_ "github.com/tenurehq/tenure/peer/lowest"
	_ "github.com/tenurehq/tenure/peer/ring"
)

// ended is a leader task's end: who, which term, and the cause of its
// context.
type ended struct {
	id    string
	term  uint64
	cause error
}

// stepDownCluster runs electors with leadership control on every member
// of a 3-member TCP group of alg, counting overlapping tasks.
type stepDownCluster struct {
	g        *tcpGroup
	running  atomic.Int32
	overlaps atomic.Int32
	starts   chan started
	ends     chan ended
}

func newStepDownCluster(t *testing.T, alg string) *stepDownCluster {
	c := &stepDownCluster{g: newTCPGroup(t, alg, 3), starts: make(chan started, 32), ends: make(chan ended, 32)}
	task := func(ctx context.Context) error {
		if c.running.Add(1) > 1 {
			c.overlaps.Add(1)
		}
		l, _ := tenure.LeaseFrom(ctx)
		c.starts <- started{l.Identity, l.Term}
		<-ctx.Done()
		c.running.Add(-1) // before the elector may release
		c.ends <- ended{l.Identity, l.Term, context.Cause(ctx)}
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for id := uint64(1); id <= 3; id++ {
		n := c.g.start(id)
		el, err := tenure.New(tenure.Config{Store: n, Key: "job", Identity: n.Identity(), TTL: 900 * time.Millisecond,
			Control: &tenure.Control{Priority: tenure.DefaultPriority}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { el.Run(ctx, task) })
	}
	return c
}

// settled waits for the task of the member the algorithm settles on (any
// if want is ""), which may start after another member's in a race at
// startup, and forgets the tasks that ended before it.
func (c *stepDownCluster) settled(t *testing.T, want string) started {
	t.Helper()
	for {
		s := awaitStart(t, c.starts)
		if want != "" && s.id != want {
			continue
		}
		for {
			select {
			case <-c.ends:
				continue
			default:
			}
			return s
		}
	}
}

// awaitEnd returns the next task end on ends, failing t after 10s.
func awaitEnd(t *testing.T, ends <-chan ended) ended {
	t.Helper()
	return receive(t, ends, "no task ended")
}

// TestStepDownThroughObserver: an observer holding the group's secret
// asks the coordinator to step down, naming a member to hand over to; in
// every algorithm run by Node, the leader's task is cancelled with
// ErrSteppedDown and returns before the named member's task starts, with
// a higher term. Without a target, another member takes over.
func TestStepDownThroughObserver(t *testing.T) {
	for _, alg := range []string{"lowest", "bully", "ring"} {
		t.Run(alg, func(t *testing.T) {
			c := newStepDownCluster(t, alg)
			obs := openObserver(t, c.g.observerURL(c.g.secret))
			first := c.settled(t, map[string]string{"lowest": "1", "bully": "3"}[alg])
			// Hand over to the member that is neither the leader nor its
			// natural successor when there is one: 2 is between 1 and 3.
			to := "2"
			sd, err := tenure.RequestStepDown(context.Background(), obs, "job", tenure.StepDownRequest{To: to, Window: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if sd.Leader.Holder != first.id || sd.Leader.Term != first.term {
				t.Fatalf("the request was made against %s@%d, want the leader %s@%d", sd.Leader.Holder, sd.Leader.Term, first.id, first.term)
			}
			e := awaitEnd(t, c.ends)
			if e.id != first.id || !errors.Is(e.cause, tenure.ErrSteppedDown) {
				t.Fatalf("task of %s ended with %v, want the leader %s with ErrSteppedDown", e.id, e.cause, first.id)
			}
			next := awaitStart(t, c.starts)
			if next.id != to || next.term <= first.term {
				t.Fatalf("after the step-down %s leads at term %d; want %s above term %d", next.id, next.term, to, first.term)
			}
			rec, err := tenure.AwaitSuccessor(context.Background(), obs, "job", first.term)
			if err != nil || rec.Holder != to {
				t.Fatalf("the observer sees %+v, %v; want %s", rec, err, to)
			}

			// A step-down naming nobody: someone but the leader takes over.
			sd, err = tenure.RequestStepDown(context.Background(), obs, "job", tenure.StepDownRequest{Window: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if e := awaitEnd(t, c.ends); e.id != to || !errors.Is(e.cause, tenure.ErrSteppedDown) {
				t.Fatalf("task of %s ended with %v, want %s with ErrSteppedDown", e.id, e.cause, to)
			}
			if third := awaitStart(t, c.starts); third.id == to || third.term <= next.term {
				t.Fatalf("after a step-down naming nobody %s leads at term %d; want another member above term %d", third.id, third.term, next.term)
			}
			if n := c.overlaps.Load(); n != 0 {
				t.Fatalf("%d times two tasks ran at once", n)
			}
		})
	}
}

// TestStepDownRefused: a request naming a non-member, or against a term
// that is not the coordinator's, is refused with an error; the leader
// keeps leading.
func TestStepDownRefused(t *testing.T) {
	c := newStepDownCluster(t, "bully")
	obs := openObserver(t, c.g.observerURL(c.g.secret))
	first := c.settled(t, "3")
	if _, err := tenure.RequestStepDown(context.Background(), obs, "job", tenure.StepDownRequest{To: "9"}); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("--to a non-member: %v, want ErrInvalid", err)
	}
	_, err := tenure.RequestStepDown(context.Background(), obs, "job", tenure.StepDownRequest{Term: first.term + 100})
	if err == nil {
		t.Fatal("a request for a term nobody holds was taken")
	}
	select {
	case e := <-c.ends:
		t.Fatalf("the task of %s ended (%v) after refused requests", e.id, e.cause)
	default:
	}
	if s := c.g.nodes[3].Status(); !s.Coordinator || strconv.FormatUint(s.LeaderEpoch, 10) != strconv.FormatUint(first.term, 10) {
		t.Fatalf("member 3 after refused requests: %+v", s)
	}
}

// TestNodeCandidates: a member's node lists the members it sees live as
// candidates (from the slots it serves); an observer lists the members
// that answer, with when their nodes started, whether asked directly or
// through tenure.Candidates.
func TestNodeCandidates(t *testing.T) {
	c := newStepDownCluster(t, "bully")
	awaitStart(t, c.starts)
	c.g.awaitLeader(3, 5*time.Second)
	obs := openObserver(t, c.g.observerURL(c.g.secret)).(interface {
		Candidates(context.Context, string) ([]tenure.Candidate, error)
	})
	fromNode, err := tenure.Candidates(context.Background(), c.g.nodes[1], "job")
	if err != nil {
		t.Fatal(err)
	}
	fromSlots, err := tenure.Candidates(context.Background(), obs.(tenure.Reader), "job")
	if err != nil {
		t.Fatal(err)
	}
	fromObserver, err := obs.Candidates(context.Background(), "job")
	if err != nil {
		t.Fatal(err)
	}
	// A follower's node has heard from the coordinator and knows itself
	// (in bully, followers do not talk to each other).
	if len(fromNode) < 2 || fromNode[0].Identity != "1" || fromNode[len(fromNode)-1].Identity != "3" {
		t.Fatalf("member 1's node lists %+v; want itself and the coordinator", fromNode)
	}
	for _, cs := range [][]tenure.Candidate{fromSlots, fromObserver} {
		if len(cs) != 3 {
			t.Fatalf("listed %+v, want the 3 members", cs)
		}
		for _, cand := range cs {
			if cand.Priority != tenure.DefaultPriority {
				t.Fatalf("listed %+v with another priority than the default", cand)
			}
		}
	}
	// The control key lives on the coordinator's node only: an observer
	// reads and watches it as free, never as the key's record.
	if r, err := obs.(tenure.Reader).Get(context.Background(), tenure.ControlKey("job")); err != nil || r.Held() {
		t.Fatalf("observer Get of the control key: %+v, %v; want free", r, err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := obs.(tenure.Reader).Watch(wctx, tenure.ControlKey("job"))
	if err != nil {
		t.Fatal(err)
	}
	if r := <-w; r.Held() || r.Key != tenure.ControlKey("job") {
		t.Fatalf("observer Watch of the control key delivered %+v; want it free", r)
	}
	for _, cand := range fromObserver {
		if cand.Since.IsZero() || time.Since(cand.Since) > time.Minute {
			t.Fatalf("the observer lists %+v: want when the member's node started", cand)
		}
	}
}

// TestStepDownTargetGoneEndsTheHoldBack: in every algorithm run by Node,
// a step-down hands over to member 2 with a window of 20 s, 2 leads, and
// its node stops. The other members used to keep abstaining for the rest
// of the window (and the old leader's elector to hold back), so nobody led
// until it ended. Now suspecting 2, the member handed over to, ends the
// hold-back: another member's task starts within a few timeouts, in a
// higher term, and no two tasks overlap.
func TestStepDownTargetGoneEndsTheHoldBack(t *testing.T) {
	for _, alg := range []string{"lowest", "bully", "ring"} {
		t.Run(alg, func(t *testing.T) {
			c := newStepDownCluster(t, alg)
			obs := openObserver(t, c.g.observerURL(c.g.secret))
			first := c.settled(t, map[string]string{"lowest": "1", "bully": "3"}[alg])
			to := "2"
			if first.id == to {
				to = "1"
			}
			const window = 20 * time.Second
			if _, err := tenure.RequestStepDown(context.Background(), obs, "job", tenure.StepDownRequest{To: to, Window: window}); err != nil {
				t.Fatal(err)
			}
			next := awaitStart(t, c.starts)
			if next.id != to || next.term <= first.term {
				t.Fatalf("after the step-down %s leads at term %d; want %s above term %d", next.id, next.term, to, first.term)
			}
			id, _ := strconv.ParseUint(to, 10, 64)
			stopped := time.Now()
			c.g.stop(id)
			third := awaitStart(t, c.starts)
			took := time.Since(stopped)
			if third.id == to || third.term <= next.term {
				t.Fatalf("after %s stopped %s leads at term %d; want another member above term %d", to, third.id, third.term, next.term)
			}
			if took > window/2 {
				t.Fatalf("%s led %s after %s stopped; want well within the %s window", third.id, took, to, window)
			}
			t.Logf("%s led %s after %s stopped", third.id, took.Round(time.Millisecond), to)
			if n := c.overlaps.Load(); n != 0 {
				t.Fatalf("%d times two tasks ran at once", n)
			}
		})
	}
}
