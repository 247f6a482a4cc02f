package transport

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/tenurehq/tenure"
)

// Member is one node of a static group: a unique ID and the address its TCP
// transport listens on ("host:port"). IDs are totally ordered; the
// algorithms compare them (lowest wins in "lowest", highest in "bully" and
// "ring").
type Member struct {
	ID   uint64
	Addr string
}

// Group is a validated static member list, sorted by ID. The zero value is an
// empty group; build one with [NewGroup] or [ParseMembers]. A Group is
// immutable and safe for concurrent use.
type Group struct {
	members []Member
}

// NewGroup validates members and returns them as a group sorted by ID. IDs
// must be non-zero (0 means "nobody" in messages) and unique; addresses, if
// set, must be host:port and unique. At least one member is required.
func NewGroup(members []Member) (Group, error) {
	if len(members) == 0 {
		return Group{}, invalidf("the group has no members")
	}
	if len(members) > MaxMembers {
		return Group{}, invalidf("the group has %d members, more than the limit of %d", len(members), MaxMembers)
	}
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	addrs := map[string]uint64{}
	for i, m := range ms {
		if m.ID == 0 {
			return Group{}, invalidf("member ID 0 is reserved (it means \"nobody\"); use IDs from 1")
		}
		if i > 0 && ms[i-1].ID == m.ID {
			return Group{}, invalidf("member ID %d appears twice", m.ID)
		}
		if m.Addr == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(m.Addr); err != nil {
			return Group{}, invalidf("member %d: address %q is not host:port: %v", m.ID, m.Addr, err)
		}
		if other, dup := addrs[m.Addr]; dup {
			return Group{}, invalidf("members %d and %d share the address %q", other, m.ID, m.Addr)
		}
		addrs[m.Addr] = m.ID
	}
	return Group{members: ms}, nil
}

// MaxMembers bounds the size of a group.
const MaxMembers = 1024

// ParseMembers parses a member list of the form "1=10.0.0.1:7001,2=10.0.0.2:7001"
// (ID=host:port, comma-separated, any order) and validates it with
// [NewGroup]. Errors wrap [tenure.ErrInvalid] and name the bad element.
func ParseMembers(s string) (Group, error) {
	if strings.TrimSpace(s) == "" {
		return Group{}, invalidf("the member list is empty (want ID=host:port,...)")
	}
	var ms []Member
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		idStr, addr, ok := strings.Cut(part, "=")
		if !ok {
			return Group{}, invalidf("member %q is not ID=host:port", part)
		}
		id, err := ParseID(idStr)
		if err != nil {
			return Group{}, err
		}
		ms = append(ms, Member{ID: id, Addr: addr})
	}
	return NewGroup(ms)
}

// ParseID parses a member ID: a decimal integer from 1 to 2^64-1.
func ParseID(s string) (uint64, error) {
	id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || id == 0 {
		return 0, invalidf("member ID %q is not a positive decimal integer", s)
	}
	return id, nil
}

// Members returns the members sorted by ID. The slice is a copy.
func (g Group) Members() []Member { return slices.Clone(g.members) }

// IDs returns the member IDs in increasing order.
func (g Group) IDs() []uint64 {
	ids := make([]uint64, len(g.members))
	for i, m := range g.members {
		ids[i] = m.ID
	}
	return ids
}

// Len is the number of members.
func (g Group) Len() int { return len(g.members) }

// Has reports whether id is a member.
func (g Group) Has(id uint64) bool { return g.Index(id) >= 0 }

// Index returns id's position in ID order (its rank, from 0), or -1.
func (g Group) Index(id uint64) int {
	i, ok := slices.BinarySearchFunc(g.members, id, func(m Member, id uint64) int {
		switch {
		case m.ID < id:
			return -1
		case m.ID > id:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// Addr returns the address of member id, or "" if it is not a member.
func (g Group) Addr(id uint64) string {
	if i := g.Index(id); i >= 0 {
		return g.members[i].Addr
	}
	return ""
}

// String renders the group as ParseMembers reads it.
func (g Group) String() string {
	var b strings.Builder
	for i, m := range g.members {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d=%s", m.ID, m.Addr)
	}
	return b.String()
}

// invalidf returns an error wrapping tenure.ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: peer: "+format, append([]any{tenure.ErrInvalid}, args...)...)
}
