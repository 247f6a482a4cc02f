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
	keys    []string // the group's keys, shared by every view
	changed chan struct{}

	once   sync.Once
	owners map[string]string // Assign(keys, live), computed at first use
}

func (v *view) has(m string) bool {
	_, ok := slices.BinarySearch(v.live, m)
	return ok
}

// owner returns key's owner among v's live members (see [Assign]).
func (v *view) owner(key string) string {
	v.once.Do(func() { v.owners = Assign(v.keys, v.live) })
	return v.owners[key]
}

// rank returns member's [Rank] for key among v's live members.
func (v *view) rank(key, member string) int { return rankGiven(key, member, v.owner(key), v.live) }

// membership follows the liveness key of every candidate member and
// publishes the live set as a sequence of views. The first view is
// published only once every member's liveness key was read: a member
// that has heard of only some of the others would otherwise campaign for
// keys it does not own (all of them, at first), only to give them up a
// moment later.
type membership struct {
	mu      sync.Mutex
	members int             // how many members there are
	keys    []string        // the keys the group spreads
	live    map[string]bool // every member heard of, and whether it is live
	cur     *view
	first   bool   // whether the first view was published
	changes uint64 // views published after the first

	// This member is live only while its own Run's liveness elector holds
	// the grant the store shows: a grant of the same identity made by
	// another process (a duplicate member) is not this member being live.
	selfMu  sync.Mutex
	self    string
	ownTerm uint64        // the term the liveness elector leads under; 0 while it does not
	selfRec tenure.Record // the last record of self's liveness key
	selfRd  bool          // selfRec was read
}

func newMembership(members int, self string, keys []string) *membership {
	return &membership{members: members, self: self, keys: keys, live: map[string]bool{}, cur: &view{keys: keys, changed: make(chan struct{})}}
}

// seenSelf records r, the record of this member's liveness key, and
// judges this member's liveness by it and the liveness elector's term.
func (m *membership) seenSelf(r tenure.Record) {
	m.selfMu.Lock()
	defer m.selfMu.Unlock()
	m.selfRec, m.selfRd = r, true
	m.judgeSelfLocked()
}

// ownLiveness returns next (if not nil) preceded by what the liveness
// elector's events say of this member's own term: elected under a term,
// or no longer leading. It is safe for concurrent use.
func (m *membership) ownLiveness(next func(tenure.Event)) func(tenure.Event) {
	return func(ev tenure.Event) {
		switch ev.Kind {
		case tenure.EventElected, tenure.EventLost, tenure.EventReleased:
			m.selfMu.Lock()
			m.ownTerm = 0
			if ev.Kind == tenure.EventElected {
				m.ownTerm = ev.Term
			}
			if m.selfRd {
				m.judgeSelfLocked()
			}
			m.selfMu.Unlock()
		}
		if next != nil {
			next(ev)
		}
	}
}

// judgeSelfLocked sets this member live if the last record of its key is
// the grant its liveness elector leads under. The caller holds selfMu.
func (m *membership) judgeSelfLocked() {
	r := m.selfRec
	m.set(m.self, r.Holder == m.self && m.ownTerm != 0 && r.Term == m.ownTerm)
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
	next := &view{keys: m.keys, changed: make(chan struct{})}
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
// ctx is done: a member is live while a grant of its key to itself is;
// this member itself, only while that grant is its own elector's (see
// seenSelf).
// An [tenure.Observer] does the watching, so store errors are retried and
// expiries of crashed members reported. A live member whose grant
// publishes another fingerprint than ours (c's, computed once by Run) was
// given other members or keys, or runs a tenure version that spreads keys
// by another rule: the two disagree on who owns which key (the
// leases keep that safe, but keys can stay unled or move back and forth),
// so it is logged, once per fingerprint seen.
func (m *membership) follow(ctx context.Context, c *Config, member, ours string) {
	o := &tenure.Observer{Store: c.Store, Key: MemberLease(c.Group, member), Poll: c.TTL / 3, Clock: c.Clock, Logger: c.Logger}
	warned := ""
	for r := range o.Changes(ctx) {
		if member == m.self {
			m.seenSelf(r)
		}
		live := r.Holder == member
		if live && r.Value != "" && r.Value != ours && r.Value != warned {
			warned = r.Value
			c.Logger.Warn("shard: a member was given other members or keys than this one, or runs a tenure version that spreads keys otherwise; every member must have the same, or they disagree on who owns which key",
				"group", c.Group, "member", member, "its_config", r.Value, "this_config", ours, "this_member", c.Identity)
		}
		if member != m.self {
			m.set(member, live)
		}
	}
}
