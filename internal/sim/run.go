package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
	"github.com/tenurehq/tenure/store/memory"
)

// Run simulates s and returns its history. It must run inside a
// testing/synctest bubble: it sleeps through s.End of time, which the
// bubble's virtual clock skips in moments. It returns once every elector's
// Run returned and every goroutine it started ended.
func Run(s *Scenario) *History {
	h := &History{origin: time.Now(), RunErrs: map[string]error{}}
	mem := memory.New(tenure.SystemClock)
	defer mem.Close()
	var shared tenure.Store = mem
	if s.WrapStore != nil {
		shared = s.WrapStore(mem)
	}
	// Store-wide outages use only the switches, never per-call draws, so
	// the order in which electors reach them does not matter. They sit in
	// front of each elector's own faults, whose latency then spreads out
	// the calls an outage releases at one instant.
	outage := faultstore.New(faultstore.Plan{
		Clock:   tenure.SystemClock,
		OnFault: func(op faultstore.Op, what string) { h.add("store", 0, "fault %s %s", op, what) },
	})

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var electors, helpers sync.WaitGroup
	helpers.Add(1)
	go func() {
		defer helpers.Done()
		schedule(ctx, h, "store", s.Outages, outage)
	}()
	// An observer follows the key from outside the electors' faults.
	helpers.Add(1)
	go func() {
		defer helpers.Done()
		o := &tenure.Observer{Store: shared, Key: "job", Poll: s.TTL / 15, Logger: slog.New(slog.DiscardHandler)}
		for r := range o.Changes(ctx) {
			h.observed(r)
		}
	}()
	faults := make([]*faultstore.Faults, len(s.Electors))
	var sessions []*tenure.Session
	defer func() {
		for _, sess := range sessions {
			_ = sess.Close(context.Background())
		}
	}()
	for i, p := range s.Electors {
		e, f := s.elector(i, h, shared, outage)
		if sess := e.Config().Session; sess != nil {
			sessions = append(sessions, sess)
		}
		faults[i] = f
		taskRand := rand.New(rand.NewPCG(s.Seed, uint64(i)+1000))
		electors.Add(1)
		go func() {
			defer electors.Done()
			h.lead(ctx, e, p, h.task(p, s.TTL, taskRand, &helpers))
		}()
		helpers.Add(1)
		go func() {
			defer helpers.Done()
			schedule(ctx, h, p.ID, p.Windows, f)
		}()
	}

	time.Sleep(s.FaultsEnd)
	outage.Heal()
	for _, f := range faults {
		// Like Heal, but keeping the latency that breaks ties.
		f.SetRates(faultstore.Rates{Latency: s.Latency})
		f.Partition(faultstore.Healthy)
		f.Resume()
	}
	h.add("sim", 0, "faults healed")
	time.Sleep(s.End - s.FaultsEnd)
	h.add("sim", 0, "stopping")
	stop()
	electors.Wait()
	helpers.Wait()
	h.End = h.since()
	return h
}

// lead runs e's task until ctx is done, with e's Run, or with
// Session.Campaign if p says so, and records how that returned.
func (h *History) lead(ctx context.Context, e *tenure.Elector, p ElectorPlan, task tenure.Task) {
	var err error
	if sess := e.Config().Session; p.Campaign && sess != nil {
		err = campaign(ctx, sess, h, p.ID, task)
	} else {
		err = e.Run(ctx, task)
	}
	h.mu.Lock()
	h.RunErrs[p.ID] = err
	h.mu.Unlock()
}

// campaign is an elector's Run done with Session.Campaign: lead, run the
// task on this goroutine until the leadership or ctx ends (or the task
// returns), resign, and campaign again, until ctx is done.
func campaign(ctx context.Context, sess *tenure.Session, h *History, id string, task tenure.Task) error {
	for {
		l, err := sess.Campaign(ctx, "job", id, "")
		if err != nil {
			return err
		}
		h.add(id, l.Lease().Term, "%s", tenure.EventElected)
		tctx, cancel := context.WithCancelCause(l.Context())
		stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
		_ = task(tctx)
		stop()
		cancel(nil)
		h.add(id, l.Lease().Term, lostFormat, reason(context.Cause(l.Context())))
		l.Resign(context.Background())
	}
}

// elector makes the scenario's elector i on shared, behind its own seeded
// faults (returned) and the store-wide outage switches, recording its
// events in h.
func (s *Scenario) elector(i int, h *History, shared tenure.Store, outage *faultstore.Faults) (*tenure.Elector, *faultstore.Faults) {
	p := s.Electors[i]
	rates := p.Rates
	rates.Latency = s.Latency
	f := faultstore.New(faultstore.Plan{
		Seed:    s.Seed<<8 | uint64(i),
		Clock:   tenure.SystemClock,
		Rates:   rates,
		OnFault: func(op faultstore.Op, what string) { h.add(p.ID, 0, "fault %s %s", op, what) },
	})
	store := faultstore.Wrap(faultstore.Wrap(shared, f), outage)
	if p.PollOnly {
		store = faultstore.PollOnly(store)
	}
	cfg := s.Config(i)
	cfg.Store = store
	cfg.Clock = faultstore.Skew(tenure.SystemClock, p.Rate)
	if p.Session {
		// A store that WrapStore planted may not share sessions: then the
		// elector renews on its own.
		sess, err := tenure.NewSession(tenure.SessionConfig{Store: store, TTL: cfg.TTL, Clock: cfg.Clock,
			Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewPCG(s.Seed, uint64(i)+2000))})
		switch {
		case err == nil:
			cfg.Session = sess
		case !errors.Is(err, errors.ErrUnsupported):
			panic(fmt.Sprintf("sim: scenario %d: %s cannot lead through a session: %v", s.Seed, p.ID, err))
		}
	}
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.Rand = rand.New(rand.NewPCG(s.Seed, uint64(i)))
	cfg.OnEvent = func(ev tenure.Event) {
		switch ev.Kind {
		case tenure.EventElected, tenure.EventRenewFailed, tenure.EventTaskOverrun:
			h.add(p.ID, ev.Term, "%s", ev.Kind)
		case tenure.EventLost, tenure.EventReleased:
			h.add(p.ID, ev.Term, lostFormat, reason(ev.Err))
		case tenure.EventLeaderChanged:
			h.add(p.ID, ev.Term, "sees leader %q", ev.Holder)
		}
	}
	e, err := tenure.New(cfg)
	if err != nil {
		panic(fmt.Sprintf("sim: scenario %d gives an invalid config: %v", s.Seed, err))
	}
	return e, f
}

// task returns the leader task of elector p: it records its leadership,
// works until its context is done or, sometimes, returns on its own, and is
// sometimes slow to notice cancellation.
func (h *History) task(p ElectorPlan, ttl time.Duration, rng *rand.Rand, helpers *sync.WaitGroup) tenure.Task {
	return func(ctx context.Context) error {
		lease, ok := tenure.LeaseFrom(ctx)
		if !ok {
			panic("sim: the task's context carries no lease")
		}
		l := h.started(p.ID, lease.Term)
		helpers.Add(1)
		go func() {
			defer helpers.Done()
			<-ctx.Done()
			h.ended(l)
		}()
		// Tasks of one elector never overlap, so rng is used by one
		// goroutine at a time.
		returns, overrun := rng.Float64() < p.ReturnP, rng.Float64() < p.OverrunP
		work := time.Duration(rng.Int64N(int64(4 * ttl)))
		lag := time.Duration(rng.Int64N(int64(ttl / 2)))
		stalls := rng.Float64() < p.StallP
		stallAt := time.Duration(rng.Int64N(int64(4 * ttl)))
		switch {
		case p.StallTimeout > 0:
			// Report progress every TTL/10 until done, or until stalling.
			began := time.Now()
			tick := time.NewTicker(ttl / 10)
			defer tick.Stop()
			noted := false
		work:
			for {
				select {
				case <-ctx.Done():
					break work
				case <-tick.C:
				}
				switch busy := time.Since(began); {
				case returns && busy >= work:
					h.add(p.ID, lease.Term, "task returns")
					return nil
				case stalls && busy >= stallAt:
					if !noted {
						h.add(p.ID, lease.Term, "task stalls")
						noted = true
					}
				default:
					tenure.Progress(ctx)
				}
			}
		case returns:
			t := time.NewTimer(work)
			defer t.Stop()
			select {
			case <-t.C:
				h.add(p.ID, lease.Term, "task returns")
				return nil
			case <-ctx.Done():
			}
		default:
			<-ctx.Done()
		}
		if overrun {
			h.add(p.ID, lease.Term, "task ignores cancellation for %s", lag)
			time.Sleep(lag)
		}
		return context.Cause(ctx)
	}
}

// schedule applies the fault windows of who to f until they are over or
// ctx is done. Overlapping windows combine: a hanging partition wins over a
// fail-fast one; a pause holds calls whenever no partition fails them.
func schedule(ctx context.Context, h *History, who string, windows []Window, f *faultstore.Faults) {
	var points []time.Duration
	for _, w := range windows {
		points = append(points, w.Start, w.End)
	}
	slices.Sort(points)
	for _, at := range points {
		t := time.NewTimer(at - h.since())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		mode, paused := faultstore.Healthy, false
		for _, w := range windows {
			if w.Start <= at && at < w.End {
				switch w.Kind {
				case PartitionHang:
					mode = faultstore.Hang
				case PartitionFailFast:
					mode = max(mode, faultstore.FailFast)
				case Pause:
					paused = true
				}
			}
		}
		f.Partition(mode)
		if paused {
			f.Pause()
		} else {
			f.Resume()
		}
		h.add(who, 0, "switches: partition %v, paused %v", modeName(mode), paused)
	}
}

func modeName(m faultstore.PartitionMode) string {
	return [...]string{"none", "fail-fast", "hang"}[m]
}

// lostFormat is the history entry of an EventLost or EventReleased; its
// argument is the reason.
const lostFormat = "lost: %s"

func reason(err error) string {
	switch {
	case err == nil:
		return "released"
	case errors.Is(err, tenure.ErrLost):
		return "ErrLost"
	case errors.Is(err, tenure.ErrRenewDeadline):
		return "ErrRenewDeadline"
	case errors.Is(err, tenure.ErrStalled):
		return "ErrStalled"
	}
	return err.Error()
}
