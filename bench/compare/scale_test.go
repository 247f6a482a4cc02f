package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	_ "github.com/tenurehq/tenure/store/zk"
)

// Settings of TestScale.
const (
	envScaleN    = "TENURE_SCALE_N"      // key counts; default 1,100,1000,10000 (1,100 with -short)
	envScaleIdle = "TENURE_SCALE_IDLE"   // idle window per measurement; default 15s (3s with -short)
	envScaleOut  = "TENURE_SCALE_OUT"    // where the table goes; default scale.md (nothing with -short); "-" for nowhere
	envScaleOnly = "TENURE_SCALE_STORES" // stores to measure, comma-separated; default all
	// envScaleModes picks tenure's modes, separated by ";", from
	// "session", "session, Campaign" and "per key"; default all.
	envScaleModes = "TENURE_SCALE_MODES"
	// envScaleFailover, if set, also crashes a process leading N ≥ 100
	// keys through a session and times their move to another process; set
	// to "campaign", the crashed process leads with Session.Campaign
	// instead of electors' Run.
	envScaleFailover = "TENURE_SCALE_FAILOVER"
	// perKeyMax is the largest N at which electors renewing each key on
	// their own are measured: beyond it they flood the server.
	perKeyMax = 1000
	scaleTTL  = 10 * time.Second
)

// scaleResult is one line of TestScale's table.
type scaleResult struct {
	store, mode string
	n           int
	elect       time.Duration // until every key was led
	reqPerSec   float64       // idle store requests per second, counted by the server
	cpuPct      float64       // idle CPU of this process, % of one core
	heapMiB     float64       // live heap (HeapAlloc) after a GC while leading, above what it was before
	stackMiB    float64       // goroutine stacks in use while leading, above what they were before
	base        memBase       // the memory in use before the electors started
	note        string        // why the idle window was not measured, if it was not
}

// scaleStore is a server TestScale measures, and its request counter.
type scaleStore struct {
	name     string
	url      string
	requests func(ctx context.Context) (int64, error)
	etcd     string // the etcd endpoint, for etcd's own Election
	// kubeconfig, for client-go's leaderelection on the same API server.
	kubeconfig string
	// maxN, if set, is the largest N measured on this store.
	maxN int
}

// TestScale measures what one process leading N keys costs: idle store
// requests per second counted by the server, CPU and memory, for tenure
// with one Session per store handle, tenure with each key renewed on its
// own (up to perKeyMax keys), and etcd's concurrency.Election with one
// Session shared by every election. It reports, it does not assert.
func TestScale(t *testing.T) {
	ns, idle := scaleSettings(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	var results []scaleResult
	var failovers []failoverResult
	only := os.Getenv(envScaleOnly)
	for _, mk := range scaleStores(ctx) {
		if only != "" && !slices.Contains(strings.Split(only, ","), mk.name) {
			continue
		}
		t.Run(mk.name, func(t *testing.T) {
			s := mk.start(t)
			for _, n := range ns {
				if s.maxN > 0 && n > s.maxN {
					t.Logf("%s: N=%d is past the %d this store is measured at", s.name, n, s.maxN)
					continue
				}
				for _, mode := range []string{"session", "session, Campaign", "per key"} {
					if mode == "per key" && n > perKeyMax {
						continue
					}
					if m := os.Getenv(envScaleModes); m != "" && !slices.Contains(strings.Split(m, ";"), mode) {
						continue
					}
					r, err := measureTenure(ctx, s, mode, n, idle)
					if errors.Is(err, errors.ErrUnsupported) {
						t.Logf("%s: %v", s.name, err)
						continue
					}
					if err != nil {
						t.Fatalf("%s, %s, N=%d: %v", s.name, mode, n, err)
					}
					t.Logf("%+v", r)
					results = append(results, r)
				}
				if n >= 100 && os.Getenv(envScaleFailover) != "" {
					f, err := measureFailover(ctx, s, n, os.Getenv(envScaleFailover) == "campaign")
					if errors.Is(err, errors.ErrUnsupported) {
						t.Logf("%s: %v", s.name, err)
					} else if err != nil {
						t.Fatalf("%s failover, N=%d: %v", s.name, n, err)
					} else {
						t.Logf("%+v", f)
						failovers = append(failovers, f)
					}
				}
				for _, other := range []struct {
					name    string
					on      bool
					measure func(context.Context, scaleStore, int, time.Duration) (scaleResult, error)
				}{
					{"client-go", s.kubeconfig != "", measureClientGo},
					{"etcd Election", s.etcd != "", measureElection},
				} {
					if !other.on {
						continue
					}
					r, err := other.measure(ctx, s, n, idle)
					if err != nil {
						t.Fatalf("%s, N=%d: %v", other.name, n, err)
					}
					t.Logf("%+v", r)
					results = append(results, r)
				}
			}
		})
	}
	writeScale(t, results, failovers, idle)
}

func scaleSettings(t *testing.T) ([]int, time.Duration) {
	ns, idle := []int{1, 100, 1000, 10000}, 15*time.Second
	if testing.Short() {
		ns, idle = []int{1, 100}, 3*time.Second
	}
	if v := os.Getenv(envScaleN); v != "" {
		ns = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: want positive numbers separated by commas", envScaleN, v)
			}
			ns = append(ns, n)
		}
	}
	if v := os.Getenv(envScaleIdle); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("%s=%q: want a duration of at least 1s", envScaleIdle, v)
		}
		idle = d
	}
	return ns, idle
}

// scaleStores lists the servers TestScale starts, in order.
func scaleStores(ctx context.Context) []struct {
	name  string
	start func(t *testing.T) scaleStore
} {
	return []struct {
		name  string
		start func(t *testing.T) scaleStore
	}{
		{"etcd", func(t *testing.T) scaleStore {
			srv := startEtcd(t)
			return scaleStore{name: "etcd", url: "etcd://" + srv.endpoint + "/scale", requests: srv.requests, etcd: srv.endpoint}
		}},
		{"redis", func(t *testing.T) scaleStore {
			srv := testserver.Redis(t, false)
			return scaleStore{name: "redis", url: srv.URL(0), requests: redisCounterFor(t, srv.Addr, srv.Password).requests}
		}},
		{"postgres", func(t *testing.T) scaleStore {
			srv := startPostgres(t, ctx)
			return scaleStore{name: "postgres", url: srv.url, requests: srv.requests}
		}},
		{"zookeeper", func(t *testing.T) scaleStore {
			srv := testserver.ZooKeeper(t)
			return scaleStore{name: "zookeeper", url: "zk://" + srv.Addr + "/scale", requests: zkRequests(srv.Addr)}
		}},
		{"kubernetes", kubeScale},
	}
}

// measureTenure leads n keys from one store handle and measures the idle
// window once every key is led.
func measureTenure(ctx context.Context, s scaleStore, mode string, n int, idle time.Duration) (scaleResult, error) {
	st, err := tenure.Open(ctx, s.url)
	if err != nil {
		return scaleResult{}, err
	}
	defer st.Close()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if mode == "session, Campaign" {
		return measureCampaign(ctx, s, st, n, idle)
	}
	var sess *tenure.Session
	if mode == "session" {
		if sess, err = tenure.NewSession(tenure.SessionConfig{Store: st, TTL: scaleTTL, Logger: quiet}); err != nil {
			return scaleResult{}, err
		}
	}
	prefix := fmt.Sprintf("scale-%s-%d-%d", strings.ReplaceAll(mode, " ", ""), n, time.Now().UnixNano())
	r := scaleResult{store: s.name, mode: "tenure, " + mode, n: n, base: memNow()}
	runCtx, stop := context.WithCancel(ctx)
	var led atomic.Int64
	all := make(chan struct{})
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range n {
		cfg := tenure.Config{Key: fmt.Sprintf("%s-%d", prefix, i), Identity: "p1", Logger: quiet}
		if sess != nil {
			cfg.Session = sess
		} else {
			cfg.Store, cfg.TTL = st, scaleTTL
		}
		e, err := tenure.New(cfg)
		if err != nil {
			stop()
			return scaleResult{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = e.Run(runCtx, func(ctx context.Context) error {
				if led.Add(1) == int64(n) {
					close(all)
				}
				<-ctx.Done()
				return nil
			})
		}()
	}
	err = waitAll(ctx, all, &led, n, 3*time.Minute)
	r.elect = time.Since(begin)
	switch {
	case err == nil:
		err = measureIdle(ctx, s, idle, &r)
	case ctx.Err() == nil:
		r.note, err = err.Error(), nil // a result: this many keys is past what it can lead
	}
	stop()
	wg.Wait()
	if sess != nil {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_ = sess.Close(cctx)
		cancel()
	}
	return r, err
}

// measureCampaign leads n keys with Session.Campaign, 64 campaigns in
// flight as with Election, and measures the idle window.
func measureCampaign(ctx context.Context, s scaleStore, st tenure.Store, n int, idle time.Duration) (scaleResult, error) {
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: scaleTTL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return scaleResult{}, err
	}
	r := scaleResult{store: s.name, mode: "tenure, session, Campaign", n: n, base: memNow()}
	prefix := fmt.Sprintf("scale-campaign-%d-%d", n, time.Now().UnixNano())
	begin := time.Now()
	sem := make(chan struct{}, 64) // campaigns in flight
	type result struct {
		l   *tenure.Leadership
		err error
	}
	results := make(chan result, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			l, err := sess.Campaign(ctx, fmt.Sprintf("%s-%d", prefix, i), "p1", "")
			results <- result{l, err}
		}()
	}
	held := make([]*tenure.Leadership, 0, n)
	for range n {
		res := <-results
		if res.err != nil {
			err = res.err
			continue
		}
		held = append(held, res.l)
	}
	r.elect = time.Since(begin)
	if err == nil {
		err = measureIdle(ctx, s, idle, &r)
	}
	for _, l := range held {
		l.Resign(ctx)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_ = sess.Close(cctx)
	return r, err
}

// measureElection campaigns for n keys with etcd's own Election, every
// election on one concurrency.Session, and measures the idle window.
func measureElection(ctx context.Context, s scaleStore, n int, idle time.Duration) (scaleResult, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.etcd}, DialTimeout: 5 * time.Second})
	if err != nil {
		return scaleResult{}, err
	}
	defer cli.Close()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(int(scaleTTL/time.Second)))
	if err != nil {
		return scaleResult{}, err
	}
	defer sess.Close()
	r := scaleResult{store: s.name, mode: "etcd concurrency.Election, one Session", n: n, base: memNow()}
	prefix := fmt.Sprintf("/scale-election-%d-%d", n, time.Now().UnixNano())
	begin := time.Now()
	sem := make(chan struct{}, 64) // campaigns in flight
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			errs <- concurrency.NewElection(sess, fmt.Sprintf("%s/%d", prefix, i)).Campaign(ctx, "p1")
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return r, err
		}
	}
	r.elect = time.Since(begin)
	return r, measureIdle(ctx, s, idle, &r)
}

// waitAll waits until all is closed, failing after limit with how many of
// n were led (if led is not nil).
func waitAll(ctx context.Context, all <-chan struct{}, led *atomic.Int64, n int, limit time.Duration) error {
	select {
	case <-all:
		return nil
	case <-time.After(limit):
		if led == nil {
			return fmt.Errorf("not all %d keys led after %s", n, limit)
		}
		return fmt.Errorf("only %d of %d keys led after %s", led.Load(), n, limit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// memBase is the live heap and the stacks in use, after a GC. Live bytes,
// not the spans in use: spans half filled by an earlier measurement's
// leftovers would hide what a later one allocates.
type memBase struct{ heap, stack uint64 }

// memNow returns the memory in use now, after a GC: what a measurement
// subtracts, so that what earlier measurements left does not count.
func memNow() memBase {
	// The previous measurement's store handle and electors wind down in
	// goroutines of their own after Close: let them finish (at most 5 s),
	// or what they hold counts in the base and is freed during the
	// measurement.
	for i, n := 0, runtime.NumGoroutine(); i < 50; i++ {
		time.Sleep(100 * time.Millisecond)
		m := runtime.NumGoroutine()
		if m >= n {
			break
		}
		n = m
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memBase{ms.HeapAlloc, ms.StackInuse}
}

// measureIdle settles for a keep-alive interval, then counts the server's
// requests and this process's CPU over idle, and reads its memory.
func measureIdle(ctx context.Context, s scaleStore, idle time.Duration, r *scaleResult) error {
	if err := pause(ctx, scaleTTL/3); err != nil {
		return err
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.heapMiB = float64(int64(ms.HeapAlloc)-int64(r.base.heap)) / (1 << 20)
	r.stackMiB = float64(int64(ms.StackInuse)-int64(r.base.stack)) / (1 << 20)
	u0, err := readUsage(ctx, s.requests)
	if err != nil {
		return err
	}
	if err := pause(ctx, idle); err != nil {
		return err
	}
	cpu1, err := ProcessCPU()
	if err != nil {
		return err
	}
	req1, err := s.requests(ctx)
	if err != nil {
		return err
	}
	took := time.Since(u0.at)
	r.reqPerSec = float64(req1-u0.requests) / took.Seconds()
	r.cpuPct = 100 * float64(cpu1-u0.cpu) / float64(took)
	return nil
}
