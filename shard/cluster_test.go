package shard_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/history"
	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/memory"
)

// cluster runs members of one group on one in-memory store and records,
// per key, who led when, in the one interval model of internal/history.
// Inside a testing/synctest bubble its times are virtual.
type cluster struct {
	t       testing.TB
	mem     *memory.Store
	members []string
	keys    []string
	ttl     time.Duration
	origin  time.Time
	// open, if set, opens each member's own handle on the store the
	// cluster shares instead of the in-memory store.
	openStore func() tenure.Store
	// wrap, if set, wraps each member's store handle.
	wrap func(id string, s tenure.Store) tenure.Store
	// stopDelay is how long a task takes to return once its context is
	// done: a slow task that the next leader of its key must wait for.
	stopDelay time.Duration
	// sessions makes each member lead through one tenure.Session (the
	// handle keeps its SessionStore ability); otherwise every key renews
	// on its own.
	sessions bool

	// fallbacks counts the keys members took by the fallback rule.
	fallbacks atomic.Int64

	mu      sync.Mutex
	ivs     map[string][]history.Interval // per key
	open    map[string]int                // key+"\x00"+member → index in ivs[key]
	running map[string]*node
}

type node struct {
	s      *shard.Sharder
	cancel context.CancelFunc
	done   chan error
	dead   *atomic.Bool
}

func newCluster(t testing.TB, members, keys []string, ttl time.Duration) *cluster {
	return &cluster{t: t, mem: memory.New(tenure.SystemClock), members: members, keys: keys, ttl: ttl,
		origin: time.Now(), ivs: map[string][]history.Interval{}, open: map[string]int{}, running: map[string]*node{}}
}

func (c *cluster) now() time.Duration { return time.Since(c.origin) }

// start runs member id.
func (c *cluster) start(id string) {
	c.t.Helper()
	dead := &atomic.Bool{}
	var h tenure.Store = c.mem.Handle()
	if c.openStore != nil {
		h = c.openStore()
	}
	var st tenure.Store = crashable{h, dead}
	if ss, ok := h.(tenure.SessionStore); ok && c.sessions {
		st = crashableSessions{crashable{h, dead}, ss}
	}
	if c.wrap != nil {
		st = c.wrap(id, st)
	}
	s, err := shard.New(shard.Config{
		Store: st, Group: "g", Identity: id, Members: c.members, Keys: c.keys,
		TTL: c.ttl, Logger: slog.New(counting{&c.fallbacks}),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &node{s: s, cancel: cancel, done: make(chan error, 1), dead: dead}
	c.mu.Lock()
	c.running[id] = n
	c.mu.Unlock()
	go func() { n.done <- s.Run(ctx, c.task(id)) }()
}

// task records the leadership of key by id from start to return.
func (c *cluster) task(id string) shard.Task {
	return func(ctx context.Context, key string) error {
		l, _ := tenure.LeaseFrom(ctx)
		c.mu.Lock()
		c.open[key+"\x00"+id] = len(c.ivs[key])
		c.ivs[key] = append(c.ivs[key], history.Interval{ID: id, Term: l.Term, Start: c.now(), End: history.Live})
		c.mu.Unlock()
		<-ctx.Done()
		time.Sleep(c.stopDelay)
		c.mu.Lock()
		c.ivs[key][c.open[key+"\x00"+id]].End = c.now()
		delete(c.open, key+"\x00"+id)
		c.mu.Unlock()
		return nil
	}
}

// stop ends member id gracefully: its tasks stop and its leases are
// released.
func (c *cluster) stop(id string) { c.end(id, false) }

// crash ends member id as a crash would: its tasks stop at once, and
// nothing is released or renewed any more, so its grants expire.
func (c *cluster) crash(id string) { c.end(id, true) }

func (c *cluster) end(id string, crash bool) {
	c.mu.Lock()
	n := c.running[id]
	delete(c.running, id)
	c.mu.Unlock()
	if crash {
		n.dead.Store(true)
	}
	n.cancel()
	<-n.done
}

func (c *cluster) live() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.running))
}

// leaders returns the member leading each key now ("" for none).
func (c *cluster) leaders() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, ivs := range c.ivs {
		for _, iv := range ivs {
			if iv.Open() {
				out[k] = iv.ID
			}
		}
	}
	return out
}

// settle waits until every key is led by its owner among the running
// members and every running member sees exactly them live, and returns how
// long after since the last of those leaderships began (0 if none began
// after since). It fails the test after limit.
func (c *cluster) settle(since, limit time.Duration) time.Duration {
	c.t.Helper()
	deadline := c.now() + limit
	for {
		if ok, _ := c.settled(); ok {
			break
		}
		if c.now() > deadline {
			_, why := c.settled()
			c.t.Fatalf("not settled %s after the change: %s", limit, why)
		}
		time.Sleep(min(c.ttl/50, time.Millisecond))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var last time.Duration
	for _, ivs := range c.ivs {
		for _, iv := range ivs {
			if iv.Open() && iv.Start > since {
				last = max(last, iv.Start-since)
			}
		}
	}
	return last
}

func (c *cluster) settled() (bool, string) {
	live := c.live()
	want := shard.Assign(c.keys, live)
	got := c.leaders()
	for _, k := range c.keys {
		if got[k] != want[k] {
			return false, fmt.Sprintf("key %s led by %q, owner %q (live %v)", k, got[k], want[k], live)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, n := range c.running {
		st := n.s.Status()
		if !slices.Equal(st.Live, live) {
			return false, fmt.Sprintf("%s sees %v live, not %v", id, st.Live, live)
		}
		if !slices.Equal(st.Leading, st.Owns) {
			return false, fmt.Sprintf("%s leads %v, owns %v", id, st.Leading, st.Owns)
		}
	}
	return true, ""
}

// check fails the test if two members led one key at once, or a key's
// terms did not grow.
func (c *cluster) check() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, ivs := range c.ivs {
		for _, v := range history.Check(ivs, c.now(), nil) {
			c.t.Errorf("key %s: %s", k, v)
		}
	}
}

// balance returns the fewest and most keys a running member leads.
func (c *cluster) balance() (lo, hi int) {
	count := map[string]int{}
	for _, id := range c.live() {
		count[id] = 0
	}
	for _, id := range c.leaders() {
		count[id]++
	}
	lo = len(c.keys)
	for _, n := range count {
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi
}

// moved counts the keys whose leader differs between two snapshots.
func moved(before, after map[string]string) int {
	n := 0
	for k, b := range before {
		if after[k] != b {
			n++
		}
	}
	return n
}

// crashable is a store handle that goes silent once dead is set, as the
// connection of a crashed process would: nothing is released or renewed,
// so the member's grants expire.
type crashable struct {
	tenure.Store
	dead *atomic.Bool
}

func (c crashable) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	if c.dead.Load() {
		return tenure.Lease{}, tenure.ErrClosed
	}
	return c.Store.Acquire(ctx, key, id, ttl)
}

func (c crashable) Renew(ctx context.Context, l tenure.Lease) error {
	if c.dead.Load() {
		return tenure.ErrClosed
	}
	return c.Store.Renew(ctx, l)
}

func (c crashable) Release(ctx context.Context, l tenure.Lease) error {
	if c.dead.Load() {
		return tenure.ErrClosed
	}
	return c.Store.Release(ctx, l)
}

// crashableSessions is a crashable store that keeps the SessionStore
// ability: a session goes silent with its handle.
type crashableSessions struct {
	crashable
	ss tenure.SessionStore
}

func (c crashableSessions) OpenSession(ctx context.Context, ttl time.Duration) (tenure.StoreSession, error) {
	if c.dead.Load() {
		return nil, tenure.ErrClosed
	}
	s, err := c.ss.OpenSession(ctx, ttl)
	if err != nil {
		return nil, err
	}
	if ba, ok := s.(tenure.BatchAcquirer); ok {
		return crashableBatchSession{crashableSession{s, c.dead}, ba}, nil
	}
	return crashableSession{s, c.dead}, nil
}

type crashableSession struct {
	tenure.StoreSession
	dead *atomic.Bool
}

func (c crashableSession) Acquire(ctx context.Context, key, id, value string) (tenure.Lease, error) {
	if c.dead.Load() {
		return tenure.Lease{}, tenure.ErrClosed
	}
	return c.StoreSession.Acquire(ctx, key, id, value)
}

// crashableBatchSession keeps a store session's ability to acquire in
// batches, so that the schedules drive the Session's batches too.
type crashableBatchSession struct {
	crashableSession
	batch tenure.BatchAcquirer
}

func (c crashableBatchSession) AcquireBatch(ctx context.Context, reqs []tenure.AcquireRequest) []tenure.AcquireResult {
	if c.dead.Load() {
		res := make([]tenure.AcquireResult, len(reqs))
		for i := range res {
			res[i].Err = tenure.ErrClosed
		}
		return res
	}
	return c.batch.AcquireBatch(ctx, reqs)
}

func (c crashableSession) KeepAlive(ctx context.Context) ([]tenure.Lease, error) {
	if c.dead.Load() {
		return nil, tenure.ErrClosed
	}
	return c.StoreSession.KeepAlive(ctx)
}

func (c crashableSession) Release(ctx context.Context, l tenure.Lease) error {
	if c.dead.Load() {
		return tenure.ErrClosed
	}
	return c.StoreSession.Release(ctx, l)
}

func (c crashableSession) Close(ctx context.Context) error {
	if c.dead.Load() {
		return tenure.ErrClosed
	}
	return c.StoreSession.Close(ctx)
}

// handoffs sums the Handoffs of the running members.
func (c *cluster) handoffs() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint64
	for _, m := range c.running {
		n += m.s.Status().Handoffs
	}
	return n
}

// status returns member id's Status.
func (c *cluster) status(id string) shard.Status {
	c.mu.Lock()
	n := c.running[id]
	c.mu.Unlock()
	return n.s.Status()
}

// counting is a quiet log handler that counts the fallback rule's takeovers.
type counting struct{ n *atomic.Int64 }

func (h counting) Enabled(context.Context, slog.Level) bool { return true }
func (h counting) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h counting) WithGroup(string) slog.Handler            { return h }
func (h counting) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "shard: leading a key its owner left unled") {
		h.n.Add(1)
	}
	return nil
}
