package shard

import (
	"context"
	"slices"
	"sync"

	"github.com/tenurehq/tenure"
)

// view is one member's picture of the live set at one moment. It is
// immutable; when the live set changes, changed is closed and the next
// view published.
type view struct {
	live    []string // sorted
	changed chan struct{}
}

func (v *view) has(m string) bool {
	_, ok := slices.BinarySearch(v.live, m)
	return ok
}

// membership follows the liveness key of every candidate member and
// publishes the live set as a sequence of views. The first view is
// published only once every member's liveness key was read: a member
// that has heard of only some of the others would otherwise campaign for
// keys it does not own (all of them, at first), only to give them up a
// moment later.
type membership struct {
	mu      sync.Mutex
	members int             // how many members there are
	live    map[string]bool // every member heard of, and whether it is live
	cur     *view
	first   bool   // whether the first view was published
	changes uint64 // views published after the first
}

func newMembership(members int) *membership {
	return &membership{members: members, live: map[string]bool{}, cur: &view{changed: make(chan struct{})}}
}

// view returns the current view.
func (m *membership) view() *view {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// changed returns how many times the live set changed after the first view.
func (m *membership) changed() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changes
}

// set records whether member is live, publishing a new view if that
// changes the live set.
func (m *membership) set(member string, live bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, heard := m.live[member]; heard && l == live {
		return
	}
	m.live[member] = live
	if len(m.live) < m.members {
		return // not every member heard of yet: no view
	}
	next := &view{changed: make(chan struct{})}
	for mem, l := range m.live {
		if l {
			next.live = append(next.live, mem)
		}
	}
	slices.Sort(next.live)
	old := m.cur
	if m.first {
		m.changes++
	}
	m.first = true
	m.cur = next
	close(old.changed)
}

// follow keeps member's liveness up to date from its liveness key until
// ctx is done: a member is live while a grant of its key to itself is.
// An [tenure.Observer] does the watching, so store errors are retried and
// expiries of crashed members reported. A live member whose grant
// publishes another fingerprint than ours (c's, computed once by Run) was
// given other members or keys: the two disagree on who owns which key (the
// leases keep that safe, but keys can stay unled or move back and forth),
// so it is logged, once per fingerprint seen.
func (m *membership) follow(ctx context.Context, c *Config, member, ours string) {
	o := &tenure.Observer{Store: c.Store, Key: memberKey(c.Group, member), Poll: c.TTL / 3, Clock: c.Clock, Logger: c.Logger}
	warned := ""
	for r := range o.Changes(ctx) {
		live := r.Holder == member
		if live && r.Value != "" && r.Value != ours && r.Value != warned {
			warned = r.Value
			c.Logger.Warn("shard: a member was given other members or keys than this one; every member must have the same, or they disagree on who owns which key",
				"group", c.Group, "member", member, "its_config", r.Value, "this_config", ours, "this_member", c.Identity)
		}
		m.set(member, live)
	}
}
