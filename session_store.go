package tenure

import (
	"context"
	"time"
)

// SessionStore is the ability of a [Store] to tie many grants to one
// liveness lease, a session, so that a process holding many keys renews
// once per interval instead of once per key: one etcd lease for every key
// of the handle, one ZooKeeper session, one batched statement or script on
// PostgreSQL and Redis. Use it through [Session] and [Config.Session];
// stores implement it. Wrappers of a store must forward it.
type SessionStore interface {
	Store
	// OpenSession starts a session that lives ttl past the store's receipt
	// of OpenSession or of the last successful [StoreSession.KeepAlive]. A
	// bad ttl gives an error wrapping [ErrInvalid].
	OpenSession(ctx context.Context, ttl time.Duration) (StoreSession, error)
}

// StoreSession is one session of a [SessionStore]. Every grant made
// through it lives exactly as long as the session, unless released or
// taken away on its own; each keeps its own key, term and holder, so
// fencing stays per key. All methods are safe for concurrent use, block
// until the store answered or ctx is done, and may or may not have been
// applied when they fail because of ctx or the network, as with [Store].
type StoreSession interface {
	// Acquire grants key to identity in the session, publishing value with
	// the grant, with the same rules and errors as [Store.Acquire] (a held
	// key gives a *[HeldError]; bad arguments, including a bad value, an
	// error wrapping [ErrInvalid]). The lease's TTL is the session's. It
	// does not extend the session: the grant ends when the session does.
	//
	// A grant that Acquire made but could not return (its reply was lost,
	// the caller got an error) must not live on with the session, kept by
	// keep-alives for a grant nobody knows of: the store ends it by the
	// next KeepAlive, or returns it, with its term, to a later Acquire of
	// the same key and identity in this session (memory and etcd do the
	// latter).
	Acquire(ctx context.Context, key, identity, value string) (Lease, error)

	// KeepAlive extends the session, and with it every grant in it, by the
	// session's TTL counted from when the store receives the request. It
	// returns the grants of the session that are no longer current (deleted
	// or superseded from outside since they were granted); those are
	// forgotten. If the session itself has ended (expired, revoked), it
	// returns an error matching [ErrLost]: every grant in it is gone. The
	// cost is the same whatever the number of grants: one request, or a
	// small fixed number. A grant released while a KeepAlive is under way
	// may or may not be among gone. A store may keep the session alive
	// longer than the TTL on its own while the process lives (ZooKeeper's
	// client pings do): nobody else gets its keys meanwhile, which is the
	// safe side; only KeepAlive proves the session to the caller.
	KeepAlive(ctx context.Context) (gone []Lease, err error)

	// Release ends one grant at once, as [Store.Release], and forgets it.
	// The session lives on.
	Release(ctx context.Context, l Lease) error

	// Close ends the session and every grant still in it, at once where
	// the store can (others need not wait for expiry). Calls after Close
	// return an error matching [ErrLost] or [ErrClosed].
	Close(ctx context.Context) error
}

// BatchAcquirer is an optional ability of a [StoreSession]: many Acquires
// in one request (one round trip, one transaction), so that a process
// taking over thousands of keys at once (the failover of a crashed peer's
// keys) pays the store's per-request cost once per batch, not per key. A
// [Session] gathers the Acquires of its campaigns that wait at the same
// time into one AcquireBatch; a session store without it gets them one by
// one.
type BatchAcquirer interface {
	// AcquireBatch asks for every request's key as [StoreSession.Acquire]
	// would, and returns one result per request, in order: each a lease or
	// the error Acquire would have returned (a *[HeldError] for a held
	// key). The keys of one batch are distinct. It blocks until the store
	// answered or ctx is done. When the batch as a whole fails (ctx, the
	// network), every result carries the error, and, as with Acquire,
	// grants the store may have made anyway must not live on with the
	// session (see [StoreSession.Acquire]).
	AcquireBatch(ctx context.Context, reqs []AcquireRequest) []AcquireResult
}

// AcquireRequest is one Acquire of a [BatchAcquirer] batch.
type AcquireRequest struct {
	Key, Identity, Value string
}

// AcquireResult is the answer to one [AcquireRequest]: a lease, or Err.
type AcquireResult struct {
	Lease Lease
	Err   error
}
