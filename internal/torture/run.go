package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/tenurehq/tenure/internal/ctxwait"
	"github.com/tenurehq/tenure/internal/history"
)

// Driver starts candidates and injects faults for one kind of run (library
// electors in this process, or `tenure run` processes against a server).
type Driver interface {
	// Name names the store, for reports.
	Name() string
	// Start starts the candidates; they report leaderships to rec and write
	// to the ledger. It returns their identities.
	Start(ctx context.Context, rec *Recorder) ([]string, error)
	// Kinds returns the faults this driver can inject.
	Kinds() []FaultKind
	// Inject applies a fault to target ("" for the store) and returns a
	// function that heals it, or nil when the fault heals by itself (a
	// kill, after which the driver restarts the candidate). The returned
	// bool marks faults outside tenure's assumptions.
	Inject(ctx context.Context, kind FaultKind, target string) (heal func() error, outside bool, err error)
	// Stop stops everything.
	Stop() error
}

// Recorder collects leaderships and the ledger of one run. Safe for
// concurrent use.
type Recorder struct {
	Ledger *Ledger
	start  time.Time

	mu        sync.Mutex
	intervals []Interval
	late      []Late
	leading   map[string]int // candidate → index of its open interval
	began     chan struct{}  // closed (and replaced) when a leadership begins
}

// NewRecorder returns a recorder whose clock starts now.
func NewRecorder() *Recorder {
	now := time.Now()
	return &Recorder{Ledger: NewLedger(now), start: now, leading: map[string]int{}, began: make(chan struct{})}
}

// Since returns the run time now.
func (r *Recorder) Since() time.Duration { return time.Since(r.start) }

// Began records that id's task started leading with term. It returns a
// function that records the end; call it once the task has stopped.
func (r *Recorder) Began(id string, term uint64) (ended func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.intervals = append(r.intervals, Interval{ID: id, Term: term, Start: r.Since(), End: history.Live})
	i := len(r.intervals) - 1
	close(r.began)
	r.began = make(chan struct{})
	var once sync.Once
	return func() {
		once.Do(func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.intervals[i].End = max(r.Since(), r.intervals[i].Start+1)
		})
	}
}

// NoticedLate records that id's task for term noticed its end after its
// renew deadline had passed by after.
func (r *Recorder) NoticedLate(id string, term uint64, after time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.late = append(r.late, Late{ID: id, Term: term, After: after})
}

// Leader returns a candidate whose leadership is open, or "".
func (r *Recorder) Leader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.intervals) - 1; i >= 0; i-- {
		if r.intervals[i].Open() {
			return r.intervals[i].ID
		}
	}
	return ""
}

// awaitLeader returns once a leadership is open, or at run time until;
// false if ctx ended first.
func (r *Recorder) awaitLeader(ctx context.Context, until time.Duration) bool {
	for {
		r.mu.Lock()
		began := r.began
		r.mu.Unlock()
		left := until - r.Since()
		if r.Leader() != "" || left <= 0 {
			return true
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-began:
		case <-t.C:
		}
		t.Stop()
	}
}

func (r *Recorder) history() ([]Interval, []Late) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.intervals), slices.Clone(r.late)
}

// Config bounds a run.
type Config struct {
	Seed     int64
	Duration time.Duration // total run time
	TTL      time.Duration
	// Gap is the quiet time between faults; FaultFor how long a healable
	// fault lasts (at least 1.5×TTL so stopped leaders lose their lease).
	Gap, FaultFor time.Duration
	// Bound is how soon after a fault heals a leader must run (Check's
	// failoverBound). After the Gap, the next fault waits until a leader
	// runs or Bound has passed since the heal, so that Check judges every
	// heal: a fault that came first would leave it unjudged.
	Bound time.Duration
	Log   func(format string, args ...any)
}

// Run drives d for c.Duration, injecting a random fault (chosen by c.Seed)
// against the current leader or the store after every quiet gap, and returns
// the history. The same seed chooses the same sequence of faults.
func Run(ctx context.Context, d Driver, c Config) (*History, error) {
	if c.Log == nil {
		c.Log = func(string, ...any) {}
	}
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x7e6e))
	rec := NewRecorder()
	ids, err := d.Start(ctx, rec)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	h := &History{Store: d.Name(), Seed: c.Seed, TTL: c.TTL, Bound: c.Bound}
	kinds := d.Kinds()
	deadline := time.Now().Add(c.Duration)
	sleep := func(d time.Duration) bool { return ctxwait.Sleep(ctx, d) }
	healed := time.Duration(-1) // the last fault's heal, if any
	for time.Until(deadline) > c.Gap+c.FaultFor+c.TTL {
		if !sleep(c.Gap) || healed >= 0 && !rec.awaitLeader(ctx, healed+c.Bound) {
			break
		}
		kind := kinds[rng.IntN(len(kinds))]
		target := rec.Leader()
		if target == "" || kind == FaultRestart {
			target = ""
			if kind != FaultRestart {
				target = ids[rng.IntN(len(ids))]
			}
		}
		f := Fault{Kind: kind, Target: target, At: rec.Since()}
		heal, outside, err := d.Inject(ctx, kind, target)
		if err != nil {
			return nil, fmt.Errorf("inject %s on %q: %w", kind, target, err)
		}
		f.OutsideAssumptions = outside
		c.Log("%8s  %-9s %s", ms(f.At), kind, target)
		if heal != nil {
			if !sleep(c.FaultFor + time.Duration(rng.Int64N(int64(c.FaultFor/2+1)))) {
				break
			}
			if err := heal(); err != nil {
				return nil, fmt.Errorf("heal %s on %q: %w", kind, target, err)
			}
		}
		f.Healed = rec.Since()
		healed = f.Healed
		h.Faults = append(h.Faults, f)
	}
	sleep(time.Until(deadline))
	h.Duration = rec.Since()
	if err := d.Stop(); err != nil {
		return nil, err
	}
	h.Intervals, h.Late = rec.history()
	h.Writes = rec.Ledger.Writes()
	return h, nil
}
