package etcd_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/stats"
	"github.com/tenurehq/tenure/internal/testserver/etcdtest"
	"github.com/tenurehq/tenure/storetest"
)

// span is one leader task's life, by the task's own clock readings.
type span struct {
	who        string
	start, end time.Time
}

// lossTrial runs two electors on their own etcd handles for a fresh key,
// waits for one to lead, deletes the leader's holder key with a plain etcd
// client (an operator cleaning up), and waits for the other one's task to
// start. It returns both tasks' spans and when the key was deleted.
func lossTrial(t testing.TB, srv *etcdtest.Server, raw *clientv3.Client, ttl time.Duration) (old, next span, deleted time.Time) {
	return lossTrialBy(t, srv, raw, ttl, func(ctx context.Context, holderKey string) error {
		_, err := raw.Delete(ctx, holderKey)
		return err
	})
}

// lossTrialBy is lossTrial with the leader's grant ended by end, given the
// holder key's full etcd name.
func lossTrialBy(t testing.TB, srv *etcdtest.Server, raw *clientv3.Client, ttl time.Duration, end func(ctx context.Context, holderKey string) error) (old, next span, deleted time.Time) {
	t.Helper()
	const prefix = "/losspushed"
	key := storetest.Key(t)
	ctx, cancel := context.WithCancel(context.Background())
	var (
		mu      sync.Mutex
		spans   []span
		started = make(chan string, 4)
		wg      sync.WaitGroup
	)
	defer func() { cancel(); wg.Wait() }()
	for _, id := range []string{"a", "b"} {
		e, err := tenure.New(tenure.Config{
			Store: openOn(srv, prefix)(t), Key: key, Identity: id, TTL: ttl,
			Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_ = e.Run(ctx, func(ctx context.Context) error {
				s := span{who: id, start: time.Now()}
				started <- id
				<-ctx.Done()
				s.end = time.Now()
				mu.Lock()
				spans = append(spans, s)
				mu.Unlock()
				return nil
			})
		})
	}
	timeout := time.After(3*ttl + 10*time.Second)
	var first string
	select {
	case first = <-started:
	case <-timeout:
		t.Fatal("nobody led")
	}
	deleted = time.Now()
	if err := end(ctx, prefix+"/holder/"+key); err != nil {
		t.Fatal(err)
	}
	var second string
	select {
	case second = <-started:
	case <-timeout:
		t.Fatalf("nobody led after %q's holder key was deleted", first)
	}
	if second == first {
		t.Fatalf("%q led again: its old task must have ended first", first)
	}
	cancel()
	wg.Wait()
	for _, s := range spans {
		if s.who == first && old.start.IsZero() {
			old = s
		} else if s.who == second {
			next = s
		}
	}
	return old, next, deleted
}

// TestLossPushedEndsTaskBeforeSuccessorStarts reproduces issue 9's etcd
// report: the leader's holder key is deleted with etcd's own client. The
// old leader's task must end before the next leader's task starts.
func TestLossPushedEndsTaskBeforeSuccessorStarts(t *testing.T) {
	srv := etcdtest.Start(t)
	raw := rawClient(t, srv)
	for i := range 3 {
		old, next, deleted := lossTrial(t, srv, raw, 2*time.Second)
		if !old.end.Before(next.start) {
			t.Fatalf("trial %d: two leaders for %s: %q's task ran until %s after %q's started",
				i, old.end.Sub(next.start), old.who, old.end.Sub(next.start), next.who)
		}
		t.Logf("trial %d: deleted → old task cancelled %s, → new task started %s",
			i, old.end.Sub(deleted), next.start.Sub(deleted))
	}
}

// BenchmarkLossPushed measures, over -benchtime=Nx trials, how long after
// the leader's holder key is deleted from outside its task is cancelled
// (pushed by its watch, not polled by renewals) and the successor's task
// starts (after the grant's Wait). TTL 2 s.
func BenchmarkLossPushed(b *testing.B) {
	srv := etcdtest.Start(b)
	raw := rawClient(b, srv)
	var cancelled, startedAfter []time.Duration
	for b.Loop() {
		old, next, deleted := lossTrial(b, srv, raw, 2*time.Second)
		if !old.end.Before(next.start) {
			b.Fatalf("two leaders for %s", old.end.Sub(next.start))
		}
		cancelled = append(cancelled, old.end.Sub(deleted))
		startedAfter = append(startedAfter, next.start.Sub(deleted))
	}
	report := func(name string, d []time.Duration) {
		p50, p99 := stats.Percentile(d, 50), stats.Percentile(d, 99)
		b.ReportMetric(float64(p50.Microseconds())/1000, name+"-p50-ms")
		b.ReportMetric(float64(p99.Microseconds())/1000, name+"-p99-ms")
		b.Logf("%s over %d trials: median %s, p99 %s", name, len(d), p50, p99)
	}
	report("cancel", cancelled)
	report("successor-start", startedAfter)
}

// BenchmarkRenew is the cost of one Renew of a held grant: a keep-alive
// and a compare-only transaction, sent together.
func BenchmarkRenew(b *testing.B) {
	srv := etcdtest.Start(b)
	st := openOn(srv, "/renew")(b)
	l, err := st.Acquire(context.Background(), "k", "a", 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := st.Renew(context.Background(), l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLossPushedRevoke is BenchmarkLossPushed with the leader's etcd
// lease revoked from outside (etcdctl lease revoke) instead of its key
// deleted. etcd cannot tell that from an expiry, so the successor gets no
// Wait: only the old leader's watch ends its task. It reports how often the
// two tasks overlapped and by how much, rather than failing.
func BenchmarkLossPushedRevoke(b *testing.B) {
	srv := etcdtest.Start(b)
	raw := rawClient(b, srv)
	revoke := func(ctx context.Context, holderKey string) error {
		resp, err := raw.Get(ctx, holderKey)
		if err != nil || len(resp.Kvs) == 0 {
			return fmt.Errorf("read holder key: %v", err)
		}
		_, err = raw.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
		return err
	}
	var cancelled, overlaps []time.Duration
	for b.Loop() {
		old, next, revoked := lossTrialBy(b, srv, raw, 2*time.Second, revoke)
		cancelled = append(cancelled, old.end.Sub(revoked))
		if d := old.end.Sub(next.start); d > 0 {
			overlaps = append(overlaps, d)
		}
	}
	b.ReportMetric(float64(len(overlaps)), "overlaps")
	b.Logf("cancel over %d trials: median %s, p99 %s; %d overlaps, longest %s",
		len(cancelled), stats.Percentile(cancelled, 50), stats.Percentile(cancelled, 99),
		len(overlaps), stats.Percentile(overlaps, 100))
}
