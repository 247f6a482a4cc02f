package shard

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tenurehq/tenure"
)

// Config configures a [Sharder]. Zero fields take the defaults that
// [Config.WithDefaults] states; [Config.Validate] checks the result.
type Config struct {
	// Store holds every lease of the group: one per member (its liveness)
	// and one per key. Required.
	Store tenure.Store
	// Group names the group. Leases live under Group/members/<member> and
	// Group/keys/<key>. Required; see [CheckGroup] for the names refused.
	Group string
	// Identity names this member; it must be one of Members. Required.
	Identity string
	// Members is every member that may ever take part, live or not, like
	// the ordinals of a StatefulSet. Every member must be given the same
	// list: it is what lets a member enumerate the others' liveness keys
	// without a List operation on the store. Required.
	Members []string
	// Keys are the keys the group spreads over its live members; every
	// member must be given the same keys. [Numbered] makes K of them.
	// Required.
	Keys []string

	// TTL is the lease duration of the liveness and key leases
	// ([tenure.Config.TTL]). Default [tenure.DefaultTTL].
	TTL time.Duration
	// Takeover is how long a key must stay unled, with the live set
	// unchanged, before the member ranked r-th for it (r ≥ 1, see [Rank])
	// campaigns for it anyway, after r × Takeover. Default 2 × TTL.
	Takeover time.Duration
	// Reclaim is how long a member that took a key it does not own (by the
	// rule of Takeover) keeps it at most before giving it back to its owner;
	// it also gives it back as soon as the live set changes. Default
	// 10 × TTL.
	Reclaim time.Duration

	// Session, if set, is the [tenure.Session] every elector of this member
	// leads through, its liveness included: one keep-alive per interval
	// for all its keys. Its store must be Store, its TTL TTL (default: the
	// session's). If nil and Store is a [tenure.SessionStore], each Run
	// opens a session of its own and closes it on return; otherwise each
	// key is renewed on its own.
	Session *tenure.Session

	// Clock defaults to [tenure.SystemClock]; Logger to [slog.Default].
	Clock  tenure.Clock
	Logger *slog.Logger
	// OnEvent, if set, receives the events of every elector of this
	// member: its liveness elector (Event.Key Group/members/<Identity>)
	// and each key's (Event.Key Group/keys/<key>). It is called from many
	// goroutines at once, so it must be safe for concurrent use, and must
	// not block.
	OnEvent func(tenure.Event)
}

// Numbered returns the k keys "0", "1", ... "k-1".
func Numbered(k int) []string {
	keys := make([]string, k)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	return keys
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Session != nil {
		sc := c.Session.Config()
		if c.Store == nil {
			c.Store = sc.Store
		}
		if c.TTL == 0 {
			c.TTL = sc.TTL
		}
		if c.Clock == nil {
			c.Clock = sc.Clock
		}
	}
	if c.TTL == 0 {
		c.TTL = tenure.DefaultTTL
	}
	if c.Takeover == 0 {
		c.Takeover = 2 * c.TTL
	}
	if c.Reclaim == 0 {
		c.Reclaim = 10 * c.TTL
	}
	if c.Clock == nil {
		c.Clock = tenure.SystemClock
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate reports the first problem with c, naming the field and its
// value, as an error wrapping [tenure.ErrInvalid].
func (c Config) Validate() error {
	switch {
	case c.Store == nil:
		return invalidf("Config.Store is nil")
	case c.Group == "":
		return invalidf("Config.Group is empty")
	case len(c.Members) == 0:
		return invalidf("Config.Members is empty")
	case !slices.Contains(c.Members, c.Identity):
		return invalidf("Config.Identity (%q) is not one of Config.Members", c.Identity)
	case len(c.Keys) == 0:
		return invalidf("Config.Keys is empty")
	case c.TTL < 0: // before Takeover and Reclaim, its multiples by default
		return invalidf("Config.TTL (%s) must be positive", c.TTL)
	case c.Takeover <= 0:
		return invalidf("Config.Takeover (%s) must be positive", c.Takeover)
	case c.Reclaim <= 0:
		return invalidf("Config.Reclaim (%s) must be positive", c.Reclaim)
	}
	if err := CheckGroup(c.Group); err != nil {
		return fmt.Errorf("Config.Group: %w", err)
	}
	if d := firstDup(c.Members); d != "" {
		return invalidf("Config.Members lists %q twice", d)
	}
	if d := firstDup(c.Keys); d != "" {
		return invalidf("Config.Keys lists %q twice", d)
	}
	for _, m := range c.Members {
		if err := checkLease(MemberLease(c.Group, m), m); err != nil {
			return fmt.Errorf("Config.Members: member %q: %w", m, err)
		}
	}
	for _, k := range c.Keys {
		if err := checkLease(KeyLease(c.Group, k), ""); err != nil {
			return fmt.Errorf("Config.Keys: key %q: %w", k, err)
		}
	}
	// The electors' own rules, for the TTL.
	if err := c.electorConfig(MemberLease(c.Group, c.Identity), c.Session).Validate(); err != nil {
		return err
	}
	return nil
}

// electorConfig is the configuration of this member's elector for one
// lease key, in session sess if not nil, defaults filled in.
func (c Config) electorConfig(key string, sess *tenure.Session) tenure.Config {
	return tenure.Config{
		Store:    c.Store,
		Session:  sess,
		Key:      key,
		Identity: c.Identity,
		TTL:      c.TTL,
		Clock:    c.Clock,
		Logger:   c.Logger,
		OnEvent:  c.OnEvent,
	}.WithDefaults()
}

// session returns the session a Run leads through and a function that
// closes it if the Run opened it: c.Session, a new one when the store can
// share one, or nil.
func (c Config) session() (*tenure.Session, func(), error) {
	if c.Session != nil {
		return c.Session, func() {}, nil
	}
	if _, ok := c.Store.(tenure.SessionStore); !ok {
		return nil, func() {}, nil
	}
	s, err := tenure.NewSession(tenure.SessionConfig{Store: c.Store, TTL: c.TTL, Clock: c.Clock, Logger: c.Logger})
	if err != nil {
		return nil, nil, err
	}
	return s, func() { _ = s.Close(context.Background()) }, nil
}

// CheckGroup returns an error wrapping [tenure.ErrInvalid] if group
// cannot name a group: if it is empty, or if one of its path segments
// after the first (the parts between slashes) is "members" or "keys".
// Such a group's leases could be another group's: member m of group
// "a/keys/b" holds the lease a/keys/b/members/m, which is also key
// "b/members/m" of group "a". The lease names of every other group differ
// from those of every other group, whatever their members and keys: in a
// lease name, the first segment after the first that is "members" or
// "keys" ends the group's name. Valid groups name their leases as they
// always did.
func CheckGroup(group string) error {
	if group == "" {
		return invalidf("group is empty")
	}
	segs := strings.Split(group, "/")
	for i := 1; i < len(segs); i++ {
		var kind string
		switch segs[i] {
		case "members":
			kind = "member"
		case "keys":
			kind = "key"
		default:
			continue
		}
		// group/members/ID is also the lease of this member or key of
		// the group named by the segments before segs[i].
		name := strings.Join(append(segs[i+1:len(segs):len(segs)], "members", "ID"), "/")
		return invalidf("group %q has the path segment %q, so its leases could be another group's "+
			"(%s/members/ID is also %s %q of group %q); rename the group",
			group, segs[i], group, kind, name, strings.Join(segs[:i], "/"))
	}
	return nil
}

// checkLease checks lease as a lease key every elector accepts: valid for
// the store ([tenure.CheckAcquire], with identity if not "") and not a key
// leadership control derives from another ([tenure.BaseKey]), which
// [tenure.New] refuses: caught here, it fails New rather than a Run
// whose member already went live.
func checkLease(lease, identity string) error {
	var err error
	if identity != "" {
		err = tenure.CheckAcquire(lease, identity, time.Second)
	} else {
		err = tenure.CheckKey(lease)
	}
	if err != nil {
		return err
	}
	if base, what, ok := tenure.BaseKey(lease); ok {
		return invalidf("lease %q is %s of %q, reserved by leadership control", lease, what, base)
	}
	return nil
}

// MemberLease is the lease key of member's liveness in group,
// group/members/member: a member is live while the store shows a grant of
// it to member.
func MemberLease(group, member string) string { return group + "/members/" + member }

// KeyLease is the lease key of key, one of group's keys: group/keys/key,
// led by the member that holds it.
func KeyLease(group, key string) string { return group + "/keys/" + key }

func firstDup(s []string) string {
	seen := make(map[string]bool, len(s))
	for _, x := range s {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: shard: "+format, append([]any{tenure.ErrInvalid}, args...)...)
}
