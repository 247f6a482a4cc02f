package zk

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
)

// errRace reports that another candidate created the lease node first.
var errRace = errors.New("lost the race for the lease node")

// Acquire implements [tenure.Store]. It reads the key node first, so a held
// key costs one read; a free key costs a new session (with timeout ttl) and
// one multi-operation.
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Store.Acquire], keeping
// c.Value in the key node's data with the grant. The value is reported
// only while the grant's lease node exists.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	if err := ctxerr.Claim(ctx, s.isClosed(), key, c); err != nil {
		return tenure.Lease{}, err
	}
	held := func(node, time.Time) (tenure.Lease, bool, error) {
		s.makeSpare(c.TTL)
		return tenure.Lease{}, false, nil
	}
	return s.acquireFree(ctx, nil, key, held, func(n node, sent time.Time) (tenure.Lease, error) {
		return s.tryAcquire(ctx, key, c, n, sent)
	})
}

// acquireFree reads the key node (over conn, or the control session if
// conn is nil) and, while the key is free, calls try
// with it and when the first read was sent, until try wins or fails with
// an error other than errRace. A held key gives a *[tenure.HeldError],
// unless held, called with the key node, returns true or an error.
func (s *Store) acquireFree(ctx context.Context, conn *zk.Conn, key string, held func(node, time.Time) (tenure.Lease, bool, error),
	try func(node, time.Time) (tenure.Lease, error)) (tenure.Lease, error) {
	sent := time.Now()
	for {
		var n node
		var err error
		if conn == nil {
			n, err = s.readNode(ctx, key)
		} else {
			n, err = s.readNodeOn(ctx, conn, key)
		}
		if err != nil {
			return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
		}
		if r := s.recordOf(key, n); r.Held() {
			if l, ok, err := held(n, sent); ok || err != nil {
				return l, err
			}
			return tenure.Lease{}, &tenure.HeldError{Record: r}
		}
		l, err := try(n, sent)
		if errors.Is(err, errRace) {
			continue // read who won, or try again if they are already gone
		}
		return l, err
	}
}

// tryAcquire opens the grant's session and creates the lease node with it
// (see [Store.grantNodes]), if the key node is still as prev read it (else
// errRace).
func (s *Store) tryAcquire(ctx context.Context, key string, c tenure.Claim, prev node, sent0 time.Time) (tenure.Lease, error) {
	g := s.takeSpare(c.TTL)
	if g == nil {
		var err error
		if g, err = s.newSession(ctx, c.TTL); err != nil {
			if errors.Is(err, tenure.ErrInvalid) {
				return tenure.Lease{}, err
			}
			return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
		}
	}
	g.key, g.identity = key, c.Identity
	sid := g.conn.SessionID()
	g.marker = s.markerPath(key, sid)
	p, err := s.grantNodes(ctx, g.conn, sid, key, c, prev, sent0)
	if err != nil {
		// Closing the session also undoes a grant whose reply was lost.
		g.end(false)
		if errors.Is(err, errRace) {
			return tenure.Lease{}, err
		}
		return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
	}
	g.term, g.version = p.term, p.version
	if !g.start(p.sent) {
		why := g.lost()
		g.end(false)
		return tenure.Lease{}, s.fail(ctx, "acquire", key, errors.New("the grant ended at once: "+why))
	}
	l := tenure.Lease{Key: key, Identity: c.Identity, Term: g.term, TTL: c.TTL, Token: g.token, Value: c.Value, Wait: p.wait}
	s.seen.Observe(key, l.Term, c.TTL)
	return l, nil
}

// placed is a grant's nodes as [Store.grantNodes] created them.
type placed struct {
	term    uint64        // the key node's Mzxid
	version int32         // the key node's version right after the grant
	czxid   int64         // the key node's creation
	sent    time.Time     // when the winning request was sent
	wait    time.Duration // the grant's Lease.Wait
	// unsure, with an error, says that the grant may have been made: the
	// multi-operation was sent and its answer lost.
	unsure bool
}

// grantNodes creates, over conn, whose session is sid, key's ephemeral
// lease node and the grant's ephemeral marker and rewrites the key node in
// one multi-operation, if the key node is still as prev read it (else
// errRace), deleting first a lease node that no session owns (see
// node.orphan). The grant's Wait is judged by waitAfter.
func (s *Store) grantNodes(ctx context.Context, conn *zk.Conn, sid int64, key string, c tenure.Claim, prev node, sent0 time.Time) (placed, error) {
	marker := s.markerPath(key, sid)
	version := int32(0) // a new key's node, created below
	if prev.st != nil {
		version = prev.st.Version
	}
	kp := s.keyPath(key)
	ops, set := s.grantOps(key, marker, encode(c.Identity, c.TTL, sid, version+1, c.Value), version, prev)
	floor := s.seen.Highest(key)
	alive := s.lastAlive(conn, sid, key, prev) // asked beside the grant
	own := false                               // this session's own marker was in the way
	if prev.st == nil {                        // a new key: create its node first
		if err := s.ensure(ctx, conn, kp); err != nil {
			return placed{}, fmt.Errorf("create the key node: %w", err)
		}
	}
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		res, err := call(ctx, func() ([]zk.MultiResponse, error) { return conn.Multi(ops...) })
		err = multiErr(res, err)
		switch {
		case err == nil && len(res) == len(ops) && res[set].Stat != nil:
			st := res[set].Stat
			p := placed{term: uint64(st.Mzxid), version: st.Version, czxid: st.Czxid, sent: sent}
			p.wait = waitAfter(prev, <-alive, floor, c.TTL, sent0)
			if own { // this session's own earlier grant may not know yet
				p.wait = max(p.wait, seen.WaitSince(sent0, c.TTL))
			}
			return p, nil
		case err == nil:
			return placed{}, errors.New("unexpected multi-operation response")
		case prev.orphan && len(res) == len(ops) && errors.Is(res[0].Error, zk.ErrNoNode):
			return placed{}, errRace // that lease node is gone: read the key again
		case errors.Is(err, zk.ErrNoNode) && attempt == 0:
			if err := s.ensure(ctx, conn, kp); err != nil {
				return placed{}, fmt.Errorf("create the key node: %w", err)
			}
		case !own && ownMarkerExists(res, set):
			if err := s.takeOwnMarker(ctx, conn, marker); err != nil {
				return placed{}, err
			}
			own = true
		case errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion):
			return placed{}, errRace
		default:
			return placed{unsure: len(res) == 0}, err
		}
	}
}

// grantOps are the operations of grantNodes's multi-operation, whose
// lease node and key node data are data, if the key node is still at
// version: the ephemeral lease node and marker created and the key node
// rewritten, after the lease node is deleted if prev found it owned by no
// session (see node.orphan). set is the index of the rewrite. The
// deletion takes whatever lease node is there: the version check of the
// key node in the same transaction fails if a grant came between.
func (s *Store) grantOps(key, marker string, data []byte, version int32, prev node) (ops []any, set int) {
	lp := s.leasePath(key)
	if prev.orphan {
		ops = append(ops, &zk.DeleteRequest{Path: lp, Version: -1})
	}
	ops = append(ops,
		&zk.CreateRequest{Path: lp, Data: data, Acl: s.acl, Flags: zk.FlagEphemeral},
		&zk.CreateRequest{Path: marker, Acl: s.acl, Flags: zk.FlagEphemeral},
		&zk.SetDataRequest{Path: s.keyPath(key), Data: data, Version: version})
	return ops, len(ops) - 1
}

// lastAlive asks over conn, in the background, whether the session of the
// grant that key node prev names lives on although that grant is gone: its
// marker exists (the lease node was deleted from outside). A session does
// not wait for itself: sid is the asking session.
func (s *Store) lastAlive(conn *zk.Conn, sid int64, key string, prev node) <-chan bool {
	alive := make(chan bool, 1)
	marker, ok := s.lastMarker(sid, key, prev)
	if !ok {
		alive <- false
		return alive
	}
	go func() {
		ok, _, err := conn.Exists(marker)
		alive <- ok || err != nil // unknown: assume the worst
	}()
	return alive
}

// lastMarker returns the marker path (see markerPath) of the session of
// the grant that key node prev names, unless prev names no session or
// sid's own, for which nobody waits.
func (s *Store) lastMarker(sid int64, key string, prev node) (string, bool) {
	last := decode(prev.data).Session
	if prev.st == nil || last == 0 || last == sid {
		return "", false
	}
	return s.markerPath(key, last), true
}

// waitAfter is the Wait of a grant made after key node prev, Acquire
// having been sent at sent0 by a candidate of TTL own: the last grant's
// TTL (see lastTTL) if its session lives on (alive) or if prev may hide a
// live grant that its marker does not show (see suspect) or its lease
// node is one that no session owns (node.orphan: created by hand, maybe
// in place of a live grant's), or, if the key node is gone although this
// Store saw the key granted (floor), the TTL of the last grant it saw.
func waitAfter(prev node, alive bool, floor seen.Grant, own time.Duration, sent0 time.Time) time.Duration {
	switch {
	case alive || suspect(prev) || prev.orphan: // changed from outside: its holder may not know
		return seen.WaitSince(sent0, lastTTL(prev, floor, own))
	case prev.st == nil && floor.Term > 0: // the key node is gone
		return seen.WaitSince(sent0, floor.TTL)
	}
	return 0
}

// vouched reports whether key node n's record is the one the last grant
// wrote, so that the session it names is the grant's: it names a session,
// and the data version it says the grant's write gave the key node is the
// node's (a rewrite from outside bumps the version). A record of an
// earlier tenure, which does not say, is taken at its word.
func vouched(n node) bool {
	rec := decode(n.data)
	return n.st != nil && rec.Session != 0 && (rec.Version == 0 || rec.Version == n.st.Version)
}

// suspect reports whether key node prev was granted (its data version is
// above 0) but its record is not vouched for: rewritten from outside, it
// may name another session than the last grant's, whose marker then
// cannot tell whether that grant's holder lives on.
func suspect(prev node) bool {
	return prev.st != nil && prev.st.Version > 0 && !vouched(prev)
}

// lastTTL is the TTL of the last grant that key node prev names, for the
// next grant to wait out: the record's if it is vouched for; else, since
// the record may lie, the largest of its TTL (if one tenure grants), the
// TTL of the last grant this Store saw of the key (floor) and the
// candidate's own (own).
func lastTTL(prev node, floor seen.Grant, own time.Duration) time.Duration {
	d := time.Duration(decode(prev.data).TTL)
	if vouched(prev) {
		return d
	}
	ttl := max(floor.TTL, own)
	if d >= tenure.MinTTL && d <= tenure.MaxTTL {
		ttl = max(ttl, d)
	}
	return ttl
}

// ownMarkerExists reports whether the multi-operation of grantNodes,
// whose key node rewrite is operation set (see grantOps), failed because
// the session's own marker exists: a session of a [tenure.StoreSession]
// outlives its grants, and the marker of one deleted from outside stays
// until its holder is told.
func ownMarkerExists(res []zk.MultiResponse, set int) bool {
	return set >= 2 && len(res) == set+1 &&
		!errors.Is(res[set-2].Error, zk.ErrNodeExists) && errors.Is(res[set-1].Error, zk.ErrNodeExists)
}

// takeOwnMarker deletes the session's own marker of an earlier grant of
// the key, so that it can take the key again; the new grant then waits as
// any next holder would, since the old grant's holder may not know yet.
func (s *Store) takeOwnMarker(ctx context.Context, conn *zk.Conn, marker string) error {
	_, err := call(ctx, func() (struct{}, error) { return struct{}{}, conn.Delete(marker, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete the session's old marker: %w", err)
	}
	return nil
}

// ensure creates the persistent node p, and its ancestors if they are
// missing: one request when only p is.
func (s *Store) ensure(ctx context.Context, conn *zk.Conn, p string) error {
	create := func() error {
		_, err := call(ctx, func() (string, error) { return conn.Create(p, nil, 0, s.acl) })
		if errors.Is(err, zk.ErrNodeExists) {
			return nil
		}
		return err
	}
	err := create()
	if !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	if parent := path.Dir(p); parent != "/" {
		if err := s.ensure(ctx, conn, parent); err != nil {
			return err
		}
	}
	return create()
}

// held returns the grant l names, after the checks that Renew and Release
// make first: a valid key, a usable store, a grant this Store made.
func (s *Store) held(ctx context.Context, l tenure.Lease) (*grant, error) {
	if err := tenure.CheckKey(l.Key); err != nil {
		return nil, err
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	return s.lookup(l)
}

// failGrant is the error of a request about grant g that failed with err:
// one matching [tenure.ErrLost] if g has ended meanwhile (its session was
// lost, say), else the store's error for op.
func (s *Store) failGrant(ctx context.Context, op string, g *grant, l tenure.Lease, err error) error {
	if why := g.lost(); why != "" {
		return fmt.Errorf("%w: key %q term %d ended: %s", tenure.ErrLost, l.Key, l.Term, why)
	}
	return s.fail(ctx, op, l.Key, err)
}

// superseded ends grant g, which ZooKeeper shows is no longer the key's,
// and returns the error matching [tenure.ErrLost] that says so.
func superseded(g *grant, l tenure.Lease) error {
	g.endWhy("it was superseded", false)
	return fmt.Errorf("%w: key %q term %d was superseded or has expired", tenure.ErrLost, l.Key, l.Term)
}

// Renew implements [tenure.Store]. The grant's session is kept alive by
// the client; Renew checks, over that session, that the lease node is
// still this grant's, and restarts the TTL after which the store ends the
// grant itself. It returns an error matching [tenure.ErrLost] at once if
// the session has been disconnected since the last call.
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	g, err := s.held(ctx, l)
	if err != nil {
		return err
	}
	sent := time.Now()
	type result struct {
		exists bool
		st     *zk.Stat
	}
	r, err := call(ctx, func() (result, error) {
		ok, st, err := g.conn.Exists(s.keyPath(l.Key))
		return result{ok, st}, err
	})
	if err != nil {
		return s.failGrant(ctx, "renew", g, l, err)
	}
	// The zxid too: a key node deleted and created again from outside
	// starts counting versions afresh.
	if !r.exists || r.st == nil || r.st.Version != g.version || uint64(r.st.Mzxid) != g.term || r.st.NumChildren == 0 {
		return superseded(g, l)
	}
	if !plainStat(r.st) { // a child made or deleted from outside: is the lease node still the grant's?
		ln, err := call(ctx, func() (result, error) {
			ok, st, err := g.conn.Exists(s.leasePath(l.Key))
			return result{ok, st}, err
		})
		if err != nil {
			return s.failGrant(ctx, "renew", g, l, err)
		}
		if !ln.exists || ln.st == nil || uint64(ln.st.Czxid) != g.term {
			return superseded(g, l)
		}
	}
	if !g.extend(sent) {
		return fmt.Errorf("%w: key %q term %d ended: %s", tenure.ErrLost, l.Key, l.Term, g.lost())
	}
	return nil
}

// Release implements [tenure.Store]: a read checks that the key node's
// zxid is still this grant's term and that its lease node is the one the
// grant created, then one multi-operation checks that its version is still
// this grant's and deletes the lease node and the grant's marker; the
// grant's session is then closed.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	g, err := s.held(ctx, l)
	if err != nil {
		return err
	}
	switch err := s.releaseNodes(ctx, g.conn, l.Key, g.term, g.version, g.marker); {
	case err == nil:
		g.end(false)
		return nil
	case errors.Is(err, errSuperseded):
		return superseded(g, l)
	default:
		return s.failGrant(ctx, "release", g, l, err)
	}
}

// errSuperseded reports that the grant to release is no longer the key's.
var errSuperseded = errors.New("the grant was superseded")

// releaseNodes deletes, over conn, the lease node and marker of key's
// grant of term term, after which the key node had version version: a
// read checks that the key node's zxid is still term (a key node deleted
// and created again from outside starts counting versions afresh) and
// that the lease node is the grant's (see ownLeaseNode), then one
// multi-operation checks the key node's version and deletes both. It
// returns errSuperseded if the grant is not the key's any more.
func (s *Store) releaseNodes(ctx context.Context, conn *zk.Conn, key string, term uint64, version int32, marker string) error {
	switch ok, err := s.ownLeaseNode(ctx, conn, key, term); {
	case err != nil:
		return err
	case !ok:
		return errSuperseded
	}
	ops := []any{
		&zk.CheckVersionRequest{Path: s.keyPath(key), Version: version},
		&zk.DeleteRequest{Path: s.leasePath(key), Version: -1},
		&zk.DeleteRequest{Path: marker, Version: -1},
	}
	for {
		res, err := call(ctx, func() ([]zk.MultiResponse, error) { return conn.Multi(ops...) })
		switch err = multiErr(res, err); {
		case len(ops) == 3 && len(res) == 3 && errors.Is(res[2].Error, zk.ErrNoNode) &&
			!errors.Is(res[0].Error, zk.ErrBadVersion) && !errors.Is(res[1].Error, zk.ErrNoNode):
			ops = ops[:2] // only the marker is missing (deleted from outside): release without it
		case errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode):
			return errSuperseded
		default:
			return err
		}
	}
}

// ownLeaseNode reports, with one read over conn (two when a child of the
// key node was made or deleted since its last write), whether key's grant
// of term term is still the key's: the key node's zxid is term, and its
// lease node is the one the grant's multi-operation created (its creation
// zxid is term). A lease node deleted and made again by hand (zkCli, with
// a session of its own or none) is then not deleted by the old holder's
// release: the key node alone, unchanged by that, cannot tell. A node
// replaced between this read and the deletion is not seen; ZooKeeper
// cannot make a deletion depend on a node's creation.
func (s *Store) ownLeaseNode(ctx context.Context, conn *zk.Conn, key string, term uint64) (bool, error) {
	return call(ctx, func() (bool, error) {
		_, st, err := conn.Exists(s.keyPath(key))
		switch {
		case err != nil:
			return false, err
		case st == nil || uint64(st.Mzxid) != term:
			return false, nil
		case plainStat(st): // no child made or deleted since the grant's write
			return st.NumChildren == 1, nil
		}
		ok, lst, err := conn.Exists(s.leasePath(key))
		return ok && lst != nil && uint64(lst.Czxid) == term, err
	})
}

// Get implements [tenure.Store] with one read of the key node.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return tenure.Record{}, err
	}
	r, err := s.read(ctx, key)
	if err != nil {
		return tenure.Record{}, s.fail(ctx, "get", key, err)
	}
	return r, nil
}

// node is the key node as read: st is nil when it does not exist.
type node struct {
	data []byte
	st   *zk.Stat
	// kids are the key node's children that tell whether the key is
	// held ("lease", or none), when read (known): only where the stat
	// cannot tell whether the lease node is among them.
	kids  []string
	known bool
	// orphan says that the lease node, when read, is owned by no session
	// (EphemeralOwner 0): created by hand (with zkCli, say), since tenure
	// creates lease nodes ephemeral only. No session's end would ever
	// delete it, so it is not a grant: the key reads free, and the next
	// grant deletes it (see grantOps) and waits (see waitAfter).
	orphan bool
	// leaseCzxid is the lease node's creation zxid, when read (else 0). A
	// grant creates its lease node in the write that sets the key node's
	// data, so one created later was made by hand (see handMade).
	leaseCzxid int64
}

// handMade reports whether n's lease node, as read, was created after the
// key node's data was last written: made by hand (zkCli create -e) after
// the grant's own lease node was deleted, so the grant that the key
// node's data names does not hold it.
func (n node) handMade() bool { return n.st != nil && n.leaseCzxid > n.st.Mzxid }

// held reports whether n, the key node, has its lease node: a child while
// the key is held. A node created under the key node from outside (with
// zkCli, say) is a child too: unless the lease node is plainly the only
// child (see plainStat), the lease node read decides, and one that no
// session owns is not a grant.
func (n node) held() bool {
	if n.st == nil || n.st.NumChildren == 0 || n.orphan {
		return false
	}
	return !n.known || slices.Contains(n.kids, "lease")
}

// withLeaseStat is key node n, read with its lease node, which exists (ok)
// with stat lst or not: see withLeaseCounted and node.orphan.
func withLeaseStat(n node, ok bool, lst *zk.Stat) node {
	n = withLeaseCounted(n, ok)
	n.orphan = ownedByNoSession(ok, lst)
	n.leaseCzxid = leaseCzxid(ok, lst)
	return n
}

// leaseCzxid is the creation zxid of a lease node that exists (ok) with
// stat lst, else 0.
func leaseCzxid(ok bool, lst *zk.Stat) int64 {
	if !ok || lst == nil {
		return 0
	}
	return lst.Czxid
}

// ownedByNoSession reports whether a lease node that exists (ok) with stat
// lst is one that no session owns (see node.orphan).
func ownedByNoSession(ok bool, lst *zk.Stat) bool {
	return ok && lst != nil && lst.EphemeralOwner == 0
}

// plainStat reports whether the key node's stat alone says whether the key
// is held: it has no child, or one child created by the write that last
// set its data (a grant's multi-operation), which is the lease node.
// Otherwise something else created or deleted a child, or rewrote the
// data, since the last grant, and the children must be read.
func plainStat(st *zk.Stat) bool {
	return st.NumChildren == 0 || st.NumChildren == 1 && st.Pzxid == st.Mzxid
}

// readNode reads the key node through the control session.
func (s *Store) readNode(ctx context.Context, key string) (node, error) {
	if _, err := s.session(ctx); err != nil {
		return node{}, err
	}
	return s.readNodeOn(ctx, s.ctl, key)
}

// readNodeOn reads the key node over conn, and its lease node too unless
// the key node's stat tells (see plainStat).
func (s *Store) readNodeOn(ctx context.Context, conn *zk.Conn, key string) (node, error) {
	got, err := call(ctx, func() (node, error) {
		data, st, err := conn.Get(s.keyPath(key))
		if err != nil || plainStat(st) {
			return node{data: data, st: st}, err
		}
		ok, lst, err := conn.Exists(s.leasePath(key))
		return withLeaseStat(node{data: data, st: st}, ok, lst), err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return node{}, nil
	}
	return got, err
}

// read reads the key node through the control session. Its data names the
// last grant, its Mzxid is that grant's term, its version counts grants,
// and it has its lease node as a child while the key is held.
func (s *Store) read(ctx context.Context, key string) (tenure.Record, error) {
	n, err := s.readNode(ctx, key)
	if err != nil {
		return tenure.Record{}, err
	}
	return s.recordOf(key, n), nil
}

// recordOf is the record key node n stands for, never with a term below
// the highest this Store saw for a free key (a key node deleted from
// outside reads as free at that term).
func (s *Store) recordOf(key string, n node) tenure.Record {
	r := tenure.Record{Key: key}
	if n.st == nil {
		return s.seen.Record(r)
	}
	if n.st.Version > 0 || n.st.NumChildren > 0 { // else created, never granted
		r.Term = uint64(n.st.Mzxid)
	}
	if n.held() {
		rec := decode(n.data)
		r.Holder, r.TTL, r.Value = rec.Holder, time.Duration(rec.TTL), rec.Value
		if r.Holder == "" || n.handMade() {
			// Held, but the node was not written by tenure, or the lease
			// node is not the grant's that the data names.
			r.Holder, r.Value = unknownHolder, ""
		}
		r.Remaining = r.TTL // an upper bound: see the package doc
	}
	return s.seen.Record(r)
}
