package tenure

import (
	"context"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits every store enforces through [CheckAcquire], so a key that works on
// one store works on all of them.
const (
	// MaxKeyLen is the longest key, in bytes.
	MaxKeyLen = 256
	// MaxIdentityLen is the longest candidate identity, in bytes.
	MaxIdentityLen = 256
	// MaxValueLen is the longest published value ([Claim.Value]), in bytes.
	MaxValueLen = 1024
)

// Lease is one grant of a key to one candidate. A store returns it from
// [Store.Acquire]; the holder passes it back to [Store.Renew] and
// [Store.Release]. It is a value: copies are fine.
type Lease struct {
	Key      string
	Identity string
	// Term is the fencing token of this grant: strictly greater than the term
	// of every earlier grant of Key by the same store, including grants made
	// before the store restarted. Hand it to the resource you protect and
	// have it reject requests carrying a smaller term.
	Term uint64
	// TTL is how long the grant lasts past the store's receipt of the last
	// successful Acquire or Renew, judged by the store's clock.
	TTL time.Duration
	// Token is store-private data identifying this grant (an etcd lease ID, a
	// blob lease ID, a ZooKeeper node path...). Callers must not interpret it.
	Token string
	// Wait is how long the new holder must hold the grant, counted from
	// when it sent Acquire, before it starts acting as leader. A store sets
	// it when the previous grant of the key ended without its holder's
	// release or expiry (deleted or revoked from outside, overwritten, a
	// peer coordinator that has not confirmed stepping down): that holder
	// may not have noticed yet, and may go on acting until its own renew
	// deadline, at most the previous grant's TTL after its last renewal.
	// The [Elector] keeps renewing during Wait and starts the task only
	// after it; a loss during Wait means the task never starts. Zero for a
	// key that was free, released or expired.
	Wait time.Duration
	// Value is the value published with this grant ([Claim.Value]); "" when
	// none was. It is fixed for the whole grant: it cannot change during a
	// term.
	Value string
}

// Record is what a store knows about a key.
type Record struct {
	Key string
	// Holder is the identity of the current holder, or "" when nobody holds
	// a live grant (never granted, released, or expired).
	Holder string
	// Term is the term of the current grant, or of the last one when the key
	// is free; 0 if the key was never granted.
	Term uint64
	// TTL is the TTL of the current grant; 0 when free.
	TTL time.Duration
	// Remaining is how long the current grant has left, as the store judged
	// it when it answered; 0 when free. It is an upper bound only in the
	// sense that the holder may release earlier.
	Remaining time.Duration
	// Value is the value the current holder published with its grant (see
	// [Publisher]), typically an address followers route to; "" when free,
	// when the holder published none, or when the store does not publish
	// values.
	Value string
}

// Held reports whether somebody holds the key.
func (r Record) Held() bool { return r.Holder != "" }

// Reader is the read side of a store: what an [Observer] needs to follow
// who leads a key without campaigning. Every [Store] is a Reader; so is a
// peer-mode observer, which can see the group's leader but cannot grant.
//
// Both methods are safe for concurrent use and return promptly with ctx's
// error when ctx is done.
type Reader interface {
	// Get returns the key's record. A key never granted has a zero Term and
	// no Holder; that is not an error.
	Get(ctx context.Context, key string) (Record, error)

	// Watch returns a channel that receives the key's current record at
	// once, then a record whenever the holder or term may have changed,
	// including when a grant expires without being released, so candidates
	// and observers wake at once instead of polling. Deliveries may
	// coalesce (the latest record wins) and may repeat. The channel is
	// closed when ctx is done or the watch fails (a lost connection);
	// callers re-read with Get and watch again. Watch blocks only while it
	// sets the watch up. Stores build it on [Follow].
	Watch(ctx context.Context, key string) (<-chan Record, error)
}

// Store keeps leases on keys. It is the one thing a backend implements; see
// package storetest for the conformance suite every store must pass.
//
// All methods are safe for concurrent use, block until the store answered or
// ctx is done, and return promptly with ctx's error when ctx is done. When a
// call fails because of ctx or the network, the store may or may not have
// applied it: a grant whose Acquire reply was lost simply expires.
//
// Expiry is judged by the store's own clock where it has one (the database
// server's, the etcd lease's), never by the caller's wall clock.
type Store interface {
	Reader

	// Acquire grants key to identity for ttl if no live grant exists, with a
	// term greater than any earlier grant of key. If the key is held it
	// returns a *[HeldError] (matching [ErrHeld]) carrying the current record;
	// that includes a live grant to the same identity. Bad arguments give an
	// error wrapping [ErrInvalid] (see [CheckAcquire]).
	Acquire(ctx context.Context, key, identity string, ttl time.Duration) (Lease, error)

	// Renew extends l by its TTL, counted from when the store receives the
	// request. If l is no longer the key's current grant it returns an error
	// matching [ErrLost] and changes nothing.
	Renew(ctx context.Context, l Lease) error

	// Release ends l at once, so another candidate can acquire the key
	// without waiting for expiry; watchers are told promptly. If l is no
	// longer the current grant it returns an error matching [ErrLost] and
	// changes nothing.
	Release(ctx context.Context, l Lease) error

	// Close releases the store's resources (connections, files). Leases still
	// held are not released: they expire, or, where the store can tell that
	// the holder went away (a local process lock, a ZooKeeper session), end
	// at once. Calls of the other methods after Close return [ErrClosed];
	// calling Close again does nothing and returns nil.
	Close() error
}

// Claim is what a candidate asks a [Publisher] to grant: the identity, the
// TTL and the value to publish with the grant.
type Claim struct {
	Identity string
	TTL      time.Duration
	// Value is published with the grant: every [Record] of the key carries
	// it while the grant is live, and it is gone once the grant ends. It is
	// not a secret (anyone who can read the store sees it), may be empty,
	// and cannot change during a term: a new value needs a new grant. At
	// most [MaxValueLen] bytes of valid UTF-8 (see [CheckValue]).
	Value string
}

// Publisher is the ability of a [Store] to publish a value with each grant,
// so followers can find the leader (an address, or any short string). The
// [Elector] needs it when [Config.Value] is set. A Publisher's Acquire is
// AcquireClaim with an empty Value, and its [Record]s carry the value of the
// live grant.
type Publisher interface {
	Store
	// AcquireClaim is [Store.Acquire] for c.Identity and c.TTL, publishing
	// c.Value with the grant. Bad arguments, including a bad value, give an
	// error wrapping [ErrInvalid] (see [CheckClaim]).
	AcquireClaim(ctx context.Context, key string, c Claim) (Lease, error)
}

// CheckClaim validates the arguments of [Publisher.AcquireClaim], as
// [CheckAcquire] and [CheckValue] do.
func CheckClaim(key string, c Claim) error {
	if err := CheckAcquire(key, c.Identity, c.TTL); err != nil {
		return err
	}
	return CheckValue(c.Value)
}

// CheckValue validates a published value: at most [MaxValueLen] bytes of
// valid UTF-8 without control characters. The empty value is valid.
func CheckValue(v string) error {
	if v == "" {
		return nil
	}
	return checkName("value", v, MaxValueLen)
}

// CheckAcquire validates the arguments of [Store.Acquire]; every store calls
// it so all stores accept the same keys and report the same errors. A key or
// identity must be non-empty, valid UTF-8 without control characters, and at
// most [MaxKeyLen] / [MaxIdentityLen] bytes; ttl must be positive.
func CheckAcquire(key, identity string, ttl time.Duration) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := checkName("identity", identity, MaxIdentityLen); err != nil {
		return err
	}
	if ttl <= 0 {
		return invalidf("ttl %s must be positive", ttl)
	}
	return nil
}

// CheckKey validates a key as [CheckAcquire] does.
func CheckKey(key string) error { return checkName("key", key, MaxKeyLen) }

func checkName(what, s string, max int) error {
	switch {
	case s == "":
		return invalidf("%s is empty", what)
	case len(s) > max:
		return invalidf("%s is %d bytes, longer than the limit of %d", what, len(s), max)
	case !utf8.ValidString(s):
		return invalidf("%s %s is not valid UTF-8", what, quoteShort(s))
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return invalidf("%s %s contains control character %U", what, quoteShort(s), r)
		}
	}
	return nil
}

// quoteShort quotes s for an error, only its first 24 bytes or so (cut
// at a rune's start) when it is longer: escaped, a 1,024-byte value could
// fill a log line four times over.
func quoteShort(s string) string {
	n := 24
	if len(s) <= n {
		return fmt.Sprintf("%q", s)
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:n], len(s))
}

// lostf returns an error wrapping ErrLost with a formatted reason.
func lostf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrLost}, args...)...)
}

// Defaulter is an optional ability of a [Store] that knows better defaults
// than the elector's: a peer node campaigns under exactly one identity, and
// some stores constrain the TTL (Azure blob leases: 15–60 s; raft: at most
// its heartbeat timeout). [Config.WithDefaults] and `tenure run` use it for
// the fields the caller left unset.
type Defaulter interface {
	// Defaults returns the identity to campaign as ("" for no preference)
	// and the TTL to use when the caller sets none (0 for no preference).
	Defaults() (identity string, ttl time.Duration)
}
