package raft

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
)

// cluster is an in-process raft cluster over hraft.InmemTransport whose
// members can be partitioned, crashed and restarted. A crashed member keeps
// its log and stable store, so a restart resumes from its durable term.
// Methods are safe for concurrent use.
type cluster struct {
	t      testing.TB
	hb     time.Duration
	ids    []string
	addrs  []hraft.ServerAddress
	stores []*hraft.InmemStore
	snaps  []*hraft.InmemSnapshotStore

	mu    sync.Mutex
	trans []*hraft.InmemTransport
	nodes []*Node     // nil while crashed
	group []int       // partition component of each member; equal means connected
	prios map[int]int // Config.Priority of members that have one

	configure func(i int, cfg *Config) // adjusts member i's Config before New; may be nil
}

// newCluster starts n members with heartbeat timeout hb. It does not wait
// for an election.
func newCluster(t testing.TB, n int, hb time.Duration) *cluster {
	return newPriorityCluster(t, n, hb, nil)
}

// newPriorityCluster is newCluster with Config.Priority prios[i] for
// member i (the default for the others).
func newPriorityCluster(t testing.TB, n int, hb time.Duration, prios map[int]int) *cluster {
	return newConfiguredCluster(t, n, hb, prios, nil)
}

// newConfiguredCluster is newPriorityCluster with configure(i, &cfg)
// applied to member i's Config before each (re)start, for a test that
// replaces its transport or stores (wrapping the cluster's own: the
// cluster links members by their *hraft.InmemTransport). configure may
// be nil.
func newConfiguredCluster(t testing.TB, n int, hb time.Duration, prios map[int]int, configure func(i int, cfg *Config)) *cluster {
	c := &cluster{t: t, hb: hb, trans: make([]*hraft.InmemTransport, n), nodes: make([]*Node, n), group: make([]int, n), prios: prios, configure: configure}
	for i := range n {
		c.ids = append(c.ids, fmt.Sprintf("n%d", i))
		c.addrs = append(c.addrs, hraft.ServerAddress(fmt.Sprintf("mem%d", i)))
		c.stores = append(c.stores, hraft.NewInmemStore())
		c.snaps = append(c.snaps, hraft.NewInmemSnapshotStore())
	}
	for i := range n {
		c.start(i)
	}
	t.Cleanup(c.close)
	return c
}

func (c *cluster) members() []Member {
	var ms []Member
	for i, id := range c.ids {
		ms = append(ms, Member{ID: id, Addr: string(c.addrs[i])})
	}
	return ms
}

// start (re)starts member i with a fresh transport and its durable stores.
func (c *cluster) start(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i] != nil {
		c.t.Fatalf("member %d is already running", i)
	}
	_, tr := hraft.NewInmemTransport(c.addrs[i])
	c.trans[i] = tr
	var prio *int
	if p, ok := c.prios[i]; ok {
		prio = &p
	}
	cfg := Config{
		ID: c.ids[i], Members: c.members(), Priority: prio,
		HeartbeatTimeout: c.hb, ElectionTimeout: c.hb, LeaderLeaseTimeout: c.hb / 2,
		Logger:    hclog.NewNullLogger(),
		Transport: tr, LogStore: c.stores[i], StableStore: c.stores[i], SnapshotStore: c.snaps[i],
	}
	if c.configure != nil {
		c.configure(i, &cfg)
	}
	n, err := New(cfg)
	if err != nil {
		c.t.Fatalf("start member %d: %v", i, err)
	}
	c.nodes[i] = n
	c.linkLocked()
	return n
}

// crash stops member i abruptly (its grants end with it).
func (c *cluster) crash(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.linkLocked()
	c.mu.Unlock()
	if n != nil {
		if err := n.Close(); err != nil {
			c.t.Errorf("close member %d: %v", i, err)
		}
	}
}

// partition splits the members into components: group[i] names member i's.
func (c *cluster) partition(group []int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	copy(c.group, group)
	c.linkLocked()
}

// heal reconnects every running member to every other.
func (c *cluster) heal() { c.partition(make([]int, len(c.ids))) }

// isolate cuts member i off from all others.
func (c *cluster) isolate(i int) {
	g := make([]int, len(c.ids))
	g[i] = 1
	c.partition(g)
}

// linkLocked connects running members in the same component and
// disconnects all other pairs, both ways.
func (c *cluster) linkLocked() {
	for i := range c.ids {
		for j := range c.ids {
			if i == j || c.nodes[i] == nil {
				continue
			}
			if c.nodes[j] != nil && c.group[i] == c.group[j] {
				c.trans[i].Connect(c.addrs[j], c.trans[j])
			} else {
				c.trans[i].Disconnect(c.addrs[j])
			}
		}
	}
}

// node returns member i, or nil while it is crashed.
func (c *cluster) node(i int) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// majority reports whether member i is running in a component holding a
// majority of the members (running ones: a crashed member votes for nobody).
func (c *cluster) majority(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[i] == nil {
		return false
	}
	size := 0
	for j := range c.ids {
		if c.nodes[j] != nil && c.group[j] == c.group[i] {
			size++
		}
	}
	return size > len(c.ids)/2
}

// leaders returns the members that raft says are leader right now.
func (c *cluster) leaders() []int {
	var ls []int
	for i := range c.ids {
		if n := c.node(i); n != nil && n.Raft().State() == hraft.Leader {
			ls = append(ls, i)
		}
	}
	return ls
}

// allSee reports whether every running member in member l's component
// reports l as leader.
func (c *cluster) allSee(l int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, n := range c.nodes {
		if n == nil || c.group[i] != c.group[l] {
			continue
		}
		if _, id := n.Raft().LeaderWithID(); string(id) != c.ids[l] {
			return false
		}
	}
	return c.nodes[l] != nil
}

func (c *cluster) close() {
	for i := range c.ids {
		c.crash(i)
	}
}

// watchAll watches key "k" on every running node of nodes (nil: crashed)
// until ctx is done, and returns a channel that receives (coalesced)
// whenever any watch delivers.
func watchAll(ctx context.Context, t testing.TB, nodes []*Node) <-chan struct{} {
	t.Helper()
	changed := make(chan struct{}, 1)
	for i, n := range nodes {
		if n == nil {
			continue
		}
		w, err := n.Watch(ctx, "k")
		if err != nil {
			t.Fatalf("watch on member %d: %v", i, err)
		}
		go func() {
			for range w {
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}()
	}
	return changed
}
