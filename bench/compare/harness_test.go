package compare

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/ctxwait"
)

// A contender is one leader-election library set up against one server.
type contender interface {
	// Start starts a candidate campaigning for key as id, with clients of
	// its own (as a separate process would have), and returns once it has
	// begun. onLead is called once, from any goroutine, when the
	// candidate's leader code starts.
	Start(ctx context.Context, key, id string, onLead func()) (candidate, error)
}

// A candidate is one elector of a contender.
type candidate interface {
	// Release makes a leader give up the way the library's users do it
	// (tenure: the task returns; etcd: Resign; pglock: Release; redsync:
	// Unlock; client-go: cancel with ReleaseOnCancel).
	Release()
	// Crash makes the candidate stop renewing and stop talking to the
	// server at once, without releasing anything, as a killed process.
	Crash()
	// Stop ends the candidate and waits until its goroutines returned.
	Stop()
}

// side is one library of a pair, with what the harness needs to know.
type side struct {
	name string
	c    contender
	// poll is the longest time a waiting candidate may go between two
	// checks of the key; 0 for one woken by a watch. Releases and crashes
	// happen at a uniformly random point of that cycle.
	poll time.Duration
	// requests returns how many requests the server has handled so far,
	// counted server-side.
	requests func(ctx context.Context) (int64, error)
}

// params are the run's settings, shared by every pair.
type params struct {
	ttl    time.Duration
	trials int
	idle   time.Duration // the idle window, split into trials sub-windows
	rng    *rand.Rand
}

// settle is the least time a new waiting candidate gets to make its first
// attempt and set up its watch before the leader is released or crashed.
// It is part of the experiment's design (after it, the release happens at a
// random phase of the waiter's cycle), not a stand-in for synchronization:
// none of the libraries reports "now waiting".
func (p params) settle() time.Duration { return p.ttl / 4 }

// waitTimeout bounds any wait for a new leader; every library here fails
// over well within it.
func (p params) waitTimeout() time.Duration { return 5*p.ttl + 5*time.Second }

// leadMark records when a candidate's leader code started.
type leadMark struct {
	once sync.Once
	ch   chan time.Time
}

func newMark() *leadMark { return &leadMark{ch: make(chan time.Time, 1)} }

func (m *leadMark) fire() { m.once.Do(func() { m.ch <- time.Now() }) }

// led reports whether the candidate has started leading, without waiting.
func (m *leadMark) led() bool { return len(m.ch) > 0 }

func (m *leadMark) wait(ctx context.Context, timeout time.Duration) (time.Time, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case at := <-m.ch:
		m.ch <- at // keep it for led()
		return at, nil
	case <-t.C:
		return time.Time{}, fmt.Errorf("no leader within %s", timeout)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// pause waits d or until ctx is done, and then returns ctx's error.
func pause(ctx context.Context, d time.Duration) error {
	ctxwait.Sleep(ctx, d)
	return ctx.Err()
}

// jitter returns a uniformly random duration in [0, d).
func (p params) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(p.rng.Int64N(int64(d)))
}

// trial is what one trial measured.
type trial struct {
	handoff, failover time.Duration
}

// runTrial runs one trial of s on a fresh key: a leads; b waits; a
// releases (handoff: until b leads); c waits; b crashes (failover: until
// c leads). It fails if a waiting candidate leads before the leader let go.
func runTrial(ctx context.Context, p params, s side, key string) (tr trial, err error) {
	var started []candidate
	defer func() {
		for _, c := range started {
			c.Stop()
		}
	}()
	start := func(id string, m *leadMark) (candidate, error) {
		c, err := s.c.Start(ctx, key, id, m.fire)
		if err != nil {
			return nil, fmt.Errorf("%s: start %s: %w", s.name, id, err)
		}
		started = append(started, c)
		return c, nil
	}
	ma, mb, mc := newMark(), newMark(), newMark()
	a, err := start("a", ma)
	if err != nil {
		return tr, err
	}
	if _, err := ma.wait(ctx, p.waitTimeout()); err != nil {
		return tr, fmt.Errorf("%s: first candidate: %w", s.name, err)
	}
	b, err := start("b", mb)
	if err != nil {
		return tr, err
	}
	if err := pause(ctx, p.settle()+p.jitter(s.poll)); err != nil {
		return tr, err
	}
	if mb.led() {
		return tr, fmt.Errorf("%s: b leads while a still holds the key", s.name)
	}
	released := time.Now()
	a.Release()
	at, err := mb.wait(ctx, p.waitTimeout())
	if err != nil {
		return tr, fmt.Errorf("%s: handoff: %w", s.name, err)
	}
	tr.handoff = at.Sub(released)
	if tr.handoff < 0 {
		return tr, fmt.Errorf("%s: b started leading %s before a released", s.name, -tr.handoff)
	}

	if _, err := start("c", mc); err != nil {
		return tr, err
	}
	// Crash at a random point of both the holder's renewal cycle (at most
	// TTL/3 for every library here) and the waiter's polling cycle.
	if err := pause(ctx, p.settle()+p.jitter(max(s.poll, p.ttl/3))); err != nil {
		return tr, err
	}
	if mc.led() {
		return tr, fmt.Errorf("%s: c leads while b still holds the key", s.name)
	}
	crashed := time.Now()
	b.Crash()
	at, err = mc.wait(ctx, p.waitTimeout())
	if err != nil {
		return tr, fmt.Errorf("%s: failover: %w", s.name, err)
	}
	tr.failover = at.Sub(crashed)
	if tr.failover < 0 {
		return tr, fmt.Errorf("%s: c started leading %s before b crashed", s.name, -tr.failover)
	}
	return tr, nil
}

// idle is what an idle window measured, one sample per sub-window, per
// elector: store requests per second and CPU milliseconds per second.
type idle struct {
	requests, cpu []float64
}

// usage is a server's request count and this process's CPU time, read
// one after the other by [readUsage], and when.
type usage struct {
	requests int64
	cpu      time.Duration
	at       time.Time
}

// readUsage reads the server's request count with requests, then this
// process's CPU time, then the clock.
func readUsage(ctx context.Context, requests func(context.Context) (int64, error)) (usage, error) {
	n, err := requests(ctx)
	if err != nil {
		return usage{}, err
	}
	cpu, err := ProcessCPU()
	if err != nil {
		return usage{}, err
	}
	return usage{requests: n, cpu: cpu, at: time.Now()}, nil
}

// runIdle runs a leader and a follower of s on key, lets them settle for a
// TTL, then samples the server's request count and the process CPU at the
// edges of p.trials sub-windows of p.idle.
func runIdle(ctx context.Context, p params, s side, key string) (idle, error) {
	var res idle
	ma, mb := newMark(), newMark()
	a, err := s.c.Start(ctx, key, "leader", ma.fire)
	if err != nil {
		return res, err
	}
	defer a.Stop()
	if _, err := ma.wait(ctx, p.waitTimeout()); err != nil {
		return res, fmt.Errorf("%s: idle leader: %w", s.name, err)
	}
	b, err := s.c.Start(ctx, key, "follower", mb.fire)
	if err != nil {
		return res, err
	}
	defer b.Stop()
	if err := pause(ctx, p.ttl); err != nil {
		return res, err
	}
	const electors = 2
	sub := p.idle / time.Duration(p.trials)
	u0, err := readUsage(ctx, s.requests)
	if err != nil {
		return res, err
	}
	for i := 0; i < p.trials; i++ {
		if err := pause(ctx, sub); err != nil {
			return res, err
		}
		u1, err := readUsage(ctx, s.requests)
		if err != nil {
			return res, err
		}
		secs := u1.at.Sub(u0.at).Seconds()
		res.requests = append(res.requests, float64(u1.requests-u0.requests)/secs/electors)
		res.cpu = append(res.cpu, float64(u1.cpu-u0.cpu)/float64(time.Millisecond)/secs/electors)
		u0 = u1
	}
	if mb.led() {
		return res, errors.New(s.name + ": the follower led during the idle window")
	}
	return res, nil
}

// pairResult is everything measured for one pair.
type pairResult struct {
	handoff, failover [2][]time.Duration // [0] tenure, [1] other
	idle              [2]idle
}

// runPair runs the trials of both sides, alternating which goes first,
// then each side's idle window alone.
func runPair(t *testing.T, ctx context.Context, p params, pair string, sides [2]side) pairResult {
	t.Helper()
	var res pairResult
	for i := 0; i < p.trials; i++ {
		order := []int{0, 1}
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, k := range order {
			key := fmt.Sprintf("cmp-%s-%d-%d", pair, k, i)
			tr, err := runTrial(ctx, p, sides[k], key)
			if err != nil {
				t.Fatalf("trial %d: %v", i, err)
			}
			res.handoff[k] = append(res.handoff[k], tr.handoff)
			res.failover[k] = append(res.failover[k], tr.failover)
		}
	}
	for k, s := range sides {
		idle, err := runIdle(ctx, p, s, fmt.Sprintf("cmp-%s-idle-%d", pair, k))
		if err != nil {
			t.Fatalf("idle: %v", err)
		}
		res.idle[k] = idle
		t.Logf("%s: handoff %v, failover %v, idle %.2f req/s and %.3f CPU ms/s per elector", s.name,
			Summarize(Millis(res.handoff[k])), Summarize(Millis(res.failover[k])),
			Summarize(idle.requests).Mean, Summarize(idle.cpu).Mean)
	}
	return res
}
