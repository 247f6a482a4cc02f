package storetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/stats"
)

// BenchOptions describes a failover benchmark.
type BenchOptions struct {
	// Open returns a new handle on the store, as in [Options]. Required.
	Open func(t testing.TB) tenure.Store
	// TTL of the electors. Default 2s.
	TTL time.Duration
	// Trials per measurement. Default 20.
	Trials int
	// Crash, if set, makes the holder of l on handle st vanish the way a
	// dead process would for this store (closing a session, say). Default:
	// the holder just stops renewing, without releasing.
	Crash func(st tenure.Store, l tenure.Lease)
	// Configure, if set, adjusts each elector's config (a poll interval for
	// stores without watch, say).
	Configure func(*tenure.Config)
}

// FailoverResult holds the samples of [BenchFailover].
type FailoverResult struct {
	Graceful, Crash []time.Duration
}

// BenchFailover measures, through real electors on the store, the two
// latencies users care about and reports their median and p99 as benchmark
// metrics (graceful-p50-ms, graceful-p99-ms, crash-p50-ms, crash-p99-ms):
//
//   - graceful handoff: the leader's task returns (so its elector releases
//     the lease) → the waiting candidate's task starts;
//   - crash failover: a holder acquires and then crashes (see
//     [BenchOptions.Crash]) → the waiting candidate's task starts. Bounded
//     below by the TTL for stores that cannot see a crash.
//
// It fails b if the two leaders' tasks ever overlapped. It ignores b.N: run
// it with -benchtime=1x.
func BenchFailover(b *testing.B, o BenchOptions) FailoverResult {
	if o.TTL == 0 {
		o.TTL = 2 * time.Second
	}
	if o.Trials == 0 {
		o.Trials = 20
	}
	var res FailoverResult
	for i := range o.Trials {
		res.Graceful = append(res.Graceful, gracefulTrial(b, o, i))
	}
	for i := range o.Trials {
		res.Crash = append(res.Crash, crashTrial(b, o, i))
	}
	g50, g99 := Percentile(res.Graceful, 50), Percentile(res.Graceful, 99)
	c50, c99 := Percentile(res.Crash, 50), Percentile(res.Crash, 99)
	b.ReportMetric(ms(g50), "graceful-p50-ms")
	b.ReportMetric(ms(g99), "graceful-p99-ms")
	b.ReportMetric(ms(c50), "crash-p50-ms")
	b.ReportMetric(ms(c99), "crash-p99-ms")
	b.Logf("TTL %s, %d trials each: graceful handoff p50 %.2f ms p99 %.2f ms; crash failover p50 %.1f ms p99 %.1f ms",
		o.TTL, o.Trials, ms(g50), ms(g99), ms(c50), ms(c99))
	b.Logf("graceful handoffs, sorted: %v", sorted(res.Graceful))
	b.Logf("crash failovers, sorted: %v", sorted(res.Crash))
	return res
}

// sorted returns a sorted copy of d, rounded to 10 µs for reading.
func sorted(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	for i := range s {
		s[i] = s[i].Round(10 * time.Microsecond)
	}
	return s
}

// OpenURL returns an Open function for [Options] or [BenchOptions] that
// opens rawURL with [tenure.Open] (so the store's package must be
// imported, for its URL scheme) and fails t if that fails. The caller of
// Open closes the store.
func OpenURL(rawURL string) func(t testing.TB) tenure.Store {
	return func(t testing.TB) tenure.Store {
		t.Helper()
		return openWith(t, tenure.Open, rawURL)
	}
}

// OpenClosing opens rawURL with open, which is [tenure.Open] (the store's
// package then must be imported, for its URL scheme) or a store package's
// own Open, for its type; it fails t if that fails, and closes the store
// when t's test ends. The test may close it before, as later calls of
// Close do nothing but return an error, ignored here.
func OpenClosing[S tenure.Store](t testing.TB, open func(context.Context, string) (S, error), rawURL string) S {
	t.Helper()
	st := openWith(t, open, rawURL)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openWith opens rawURL with open, allowing it 30 s (to connect, for the
// stores that do), and fails t if that fails.
func openWith[S tenure.Store](t testing.TB, open func(context.Context, string) (S, error), rawURL string) S {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := open(ctx, rawURL)
	if err != nil {
		t.Fatalf("opening %s: %v", tenure.Redact(rawURL), err)
	}
	return st
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Percentile returns the p-th percentile (nearest rank) of samples,
// without modifying them.
func Percentile(samples []time.Duration, p float64) time.Duration {
	return stats.Percentile(samples, p)
}

// open opens a store handle closed when the benchmark ends.
func (o *BenchOptions) open(b *testing.B) tenure.Store {
	st := o.Open(b)
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// follower campaigns for key and reports when its task starts.
type follower struct {
	store    tenure.Store
	started  chan time.Time
	waiting  chan struct{} // closed once it has seen the key held
	cancel   context.CancelFunc
	done     chan struct{}
	seenOnce sync.Once
}

func startFollower(b *testing.B, o BenchOptions, key string) *follower {
	b.Helper()
	f := &follower{store: o.Open(b), started: make(chan time.Time, 1), waiting: make(chan struct{}), done: make(chan struct{})}
	cfg := tenure.Config{
		Store: f.store, Key: key, Identity: "follower", TTL: o.TTL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(ev tenure.Event) {
			if ev.Kind == tenure.EventLeaderChanged && ev.Holder != "" {
				f.seenOnce.Do(func() { close(f.waiting) })
			}
		},
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	e, err := tenure.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() {
		defer close(f.done)
		_ = e.Run(ctx, func(ctx context.Context) error {
			select {
			case f.started <- time.Now():
			default:
			}
			<-ctx.Done()
			return nil
		})
	}()
	return f
}

func (f *follower) stop() { f.cancel(); <-f.done; _ = f.store.Close() }

func (f *follower) await(b *testing.B, what string, limit time.Duration) time.Time {
	select {
	case t := <-f.started:
		return t
	case <-time.After(limit):
		b.Fatalf("%s: the follower was not elected within %s", what, limit)
		return time.Time{}
	}
}

func (f *follower) awaitWaiting(b *testing.B, limit time.Duration) {
	select {
	case <-f.waiting:
	case <-time.After(limit):
		b.Fatalf("the follower never saw the key held within %s", limit)
	}
}

func gracefulTrial(b *testing.B, o BenchOptions, i int) time.Duration {
	key := fmt.Sprintf("%s-graceful-%d", Key(b), i)
	leaderStarted, release := make(chan struct{}), make(chan struct{})
	var ended time.Time
	leaderStore := o.Open(b)
	defer leaderStore.Close()
	cfg := tenure.Config{
		Store: leaderStore, Key: key, Identity: "leader", TTL: o.TTL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if o.Configure != nil {
		o.Configure(&cfg)
	}
	leader, err := tenure.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	doneLeader := make(chan error, 1)
	go func() {
		doneLeader <- leader.Do(context.Background(), func(context.Context) error {
			close(leaderStarted)
			<-release
			ended = time.Now()
			return nil
		})
	}()
	select {
	case <-leaderStarted:
	case <-time.After(o.TTL * 5):
		b.Fatalf("graceful trial %d: the first candidate was not elected", i)
	}
	f := startFollower(b, o, key)
	defer f.stop()
	f.awaitWaiting(b, o.TTL*5)
	begin := time.Now()
	close(release)
	started := f.await(b, fmt.Sprintf("graceful trial %d", i), o.TTL*5)
	if err := <-doneLeader; err != nil {
		b.Fatalf("graceful trial %d: leader: %v", i, err)
	}
	if started.Before(ended) {
		b.Fatalf("graceful trial %d: the follower's task started %s before the leader's ended", i, ended.Sub(started))
	}
	return started.Sub(begin)
}

func crashTrial(b *testing.B, o BenchOptions, i int) time.Duration {
	key := fmt.Sprintf("%s-crash-%d", Key(b), i)
	st := o.open(b) // a crashed holder's handle stays open until the end
	l, err := st.Acquire(context.Background(), key, "crasher", o.TTL)
	if err != nil {
		b.Fatalf("crash trial %d: %v", i, err)
	}
	crashed := time.Now()
	f := startFollower(b, o, key)
	defer f.stop()
	if o.Crash != nil {
		f.awaitWaiting(b, o.TTL*5)
		crashed = time.Now()
		o.Crash(st, l)
	}
	started := f.await(b, fmt.Sprintf("crash trial %d", i), o.TTL*5)
	if started.Sub(crashed) < 0 {
		b.Fatalf("crash trial %d: follower elected before the crash", i)
	}
	return started.Sub(crashed)
}
