package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
)

// Scenario is everything one simulated run does, drawn from a seed by
// [Generate]. Tests may edit it before [Run] (to make it unsafe on purpose).
type Scenario struct {
	Seed uint64
	// TTL is the lease TTL; every other timing is the elector default
	// derived from it.
	TTL time.Duration
	// Rho bounds clock drift: every elector clock runs at a rate within
	// [1−Rho, 1+Rho] of the store's.
	Rho float64
	// Latency is the base latency of every store call, before and after
	// the heal (see [faultstore.Rates.Latency]); it makes ties between
	// electors resolve by the seed.
	Latency time.Duration
	// FaultsEnd is when every fault heals; End is when the run stops. Both
	// are offsets from the start of the run.
	FaultsEnd, End time.Duration
	Electors       []ElectorPlan
	// Outages are windows during which the store itself is unreachable or
	// paused for every elector at once.
	Outages []Window
	// WrapStore, if set, wraps the shared store under every elector's
	// faultstore: a way to plant a broken store and see the checker fail.
	WrapStore func(tenure.Store) tenure.Store
}

// ElectorPlan is one elector's share of a [Scenario].
type ElectorPlan struct {
	ID string
	// Rate is how fast this elector's clock runs relative to the store's.
	Rate float64
	// PollOnly hides the store's watch, so this elector polls.
	PollOnly bool
	// Session makes the elector lead through a tenure.Session of its own
	// (on its faulty store and its clock): keep-alives instead of renewals.
	Session bool
	// Campaign (with Session, without StallTimeout) leads through the
	// session's Campaign instead of an elector's Run: the task runs on the
	// campaigning goroutine with the leadership's context, then resigns.
	Campaign bool
	// Rates are the per-call fault rates during the fault phase.
	Rates faultstore.Rates
	// Windows are partitions and pauses during the fault phase.
	Windows []Window
	// ReturnP is the probability that a term's task returns on its own,
	// after a uniform time in [0, 4×TTL); OverrunP the probability that it
	// keeps running up to TTL/2 after its context is cancelled.
	ReturnP, OverrunP float64
	// StallTimeout, if positive, is the elector's Config.StallTimeout: its
	// tasks report progress every TTL/10, and with probability StallP a
	// term's task stops doing so after a uniform time in [0, 4×TTL).
	StallTimeout time.Duration
	StallP       float64
}

// WindowKind is the kind of a fault [Window].
type WindowKind int

// Window kinds.
const (
	PartitionFailFast WindowKind = iota
	PartitionHang
	Pause
)

func (k WindowKind) String() string {
	return [...]string{"partition-fail-fast", "partition-hang", "pause"}[k]
}

// Window is a stretch of virtual time during which an elector's store calls
// fail or hang.
type Window struct {
	Kind       WindowKind
	Start, End time.Duration
}

// Config returns the elector configuration for plan i, before Store, Clock
// and hooks are set: the defaults derived from TTL.
func (s *Scenario) Config(i int) tenure.Config {
	p := s.Electors[i]
	return tenure.Config{Key: "job", Identity: p.ID, TTL: s.TTL, StallTimeout: p.StallTimeout}.WithDefaults()
}

// LivenessBound is how long after FaultsEnd a leader must be live, and the
// longest gap between two leaderships after that (see the package
// documentation for the derivation).
func (s *Scenario) LivenessBound() time.Duration {
	c := s.Config(0)
	d := float64(c.RequestTimeout) + float64(c.TTL)*c.Jitter + float64(c.RetryInterval)*c.Jitter
	return time.Duration(d/(1-s.Rho)) + 50*time.Millisecond
}

// Generate draws the scenario of seed.
func Generate(seed uint64) *Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x7e4e5e))
	ttl := time.Second
	s := &Scenario{
		Seed:      seed,
		TTL:       ttl,
		Rho:       0.01,
		Latency:   2 * time.Millisecond,
		FaultsEnd: 10 * ttl,
	}
	n := 3 + rng.IntN(3)
	// Drawn apart, so that adding it left every other draw of a seed as
	// it was.
	sessions := rand.New(rand.NewPCG(seed, 0x5e5510))
	campaigns := rand.New(rand.NewPCG(seed, 0xca3a16))
	for i := range n {
		p := ElectorPlan{
			ID:       fmt.Sprintf("e%d", i),
			Rate:     1 + s.Rho*(2*rng.Float64()-1),
			PollOnly: rng.IntN(4) == 0,
			Session:  sessions.IntN(3) == 0,
			ReturnP:  0.3 * rng.Float64(),
			OverrunP: 0.2 * rng.Float64(),
		}
		if rng.IntN(3) == 0 {
			p.StallTimeout, p.StallP = ttl/2, 0.5*rng.Float64()
		}
		p.Campaign = campaigns.IntN(2) == 0 && p.Session && p.StallTimeout == 0
		// A quarter of the electors are well behaved; the others get a
		// random mix of every fault.
		if rng.IntN(4) != 0 {
			p.Rates = faultstore.Rates{
				FailBefore:  0.3 * rng.Float64(),
				FailAfter:   0.2 * rng.Float64(),
				DelayBefore: 0.4 * rng.Float64(),
				DelayAfter:  0.4 * rng.Float64(),
				MaxDelay:    time.Duration(rng.Float64() * float64(ttl) / 2),
			}
			p.Windows = randomWindows(rng, s.FaultsEnd, rng.IntN(5), 3*ttl)
		}
		s.Electors = append(s.Electors, p)
	}
	if rng.IntN(3) == 0 {
		s.Outages = randomWindows(rng, s.FaultsEnd, 1+rng.IntN(2), 2*ttl)
	}
	s.End = s.FaultsEnd + 2*s.LivenessBound()
	return s
}

// randomWindows draws n windows of random kinds, each starting before end
// and lasting up to longest, cut to close a random moment before end: no
// two windows close at one instant, nor at the instant everything heals,
// which would leave the order of their effects to the scheduler.
func randomWindows(rng *rand.Rand, end time.Duration, n int, longest time.Duration) []Window {
	var ws []Window
	for range n {
		cut := end - 10*time.Millisecond - time.Duration(rng.Int64N(int64(100*time.Millisecond)))
		start := time.Duration(rng.Int64N(int64(cut)))
		length := time.Duration(float64(longest) * (0.02 + 0.98*rng.Float64()))
		ws = append(ws, Window{Kind: WindowKind(rng.IntN(3)), Start: start, End: min(start+length, cut)})
	}
	return ws
}

// String describes the scenario, for failure reports.
func (s *Scenario) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d electors, TTL %s, rho %g, faults until %s, end %s, liveness bound %s\n",
		s.Seed, len(s.Electors), s.TTL, s.Rho, s.FaultsEnd, s.End, s.LivenessBound())
	for _, w := range s.Outages {
		fmt.Fprintf(&b, "  store-wide %s from %s to %s\n", w.Kind, w.Start.Round(time.Millisecond), w.End.Round(time.Millisecond))
	}
	for _, p := range s.Electors {
		r := p.Rates
		fmt.Fprintf(&b, "  %s: clock rate %.5f, poll-only %v, session %v, campaign %v, fail before %.2f after %.2f, delay before %.2f after %.2f up to %s, task returns %.2f overruns %.2f, stall timeout %s stalls %.2f\n",
			p.ID, p.Rate, p.PollOnly, p.Session, p.Campaign, r.FailBefore, r.FailAfter, r.DelayBefore, r.DelayAfter, r.MaxDelay.Round(time.Millisecond),
			p.ReturnP, p.OverrunP, p.StallTimeout, p.StallP)
		for _, w := range p.Windows {
			fmt.Fprintf(&b, "    %s from %s to %s\n", w.Kind, w.Start.Round(time.Millisecond), w.End.Round(time.Millisecond))
		}
	}
	return b.String()
}
