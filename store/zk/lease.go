package zk

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
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
	if err := tenure.CheckClaim(key, c); err != nil {
		return tenure.Lease{}, err
	}
	ttl := c.TTL
	if err := s.usable(ctx); err != nil {
		return tenure.Lease{}, err
	}
	sent := time.Now()
	for {
		n, err := s.readNode(ctx, key)
		if err != nil {
			return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
		}
		if r := s.recordOf(key, n); r.Held() {
			s.makeSpare(ttl)
			return tenure.Lease{}, &tenure.HeldError{Record: r}
		}
		l, err := s.tryAcquire(ctx, key, c, n, sent)
		if errors.Is(err, errRace) {
			continue // read who won, or try again if they are already gone
		}
		return l, err
	}
}

// tryAcquire opens the grant's session and creates the lease node with it,
// if the key node is still as prev read it (else errRace). The grant's Wait
// is the last grant's TTL if that grant's session still lives (its marker
// node exists: the lease node was deleted from outside), or, if the key
// node is gone although this Store saw the key granted, the TTL of the last
// grant it saw.
func (s *Store) tryAcquire(ctx context.Context, key string, c tenure.Claim, prev node, sent0 time.Time) (tenure.Lease, error) {
	identity, ttl := c.Identity, c.TTL
	g := s.takeSpare(ttl)
	if g == nil {
		var err error
		if g, err = s.newSession(ctx, ttl); err != nil {
			if errors.Is(err, tenure.ErrInvalid) {
				return tenure.Lease{}, err
			}
			return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
		}
	}
	g.key, g.identity = key, identity
	sid := g.conn.SessionID()
	g.marker = s.markerPath(key, sid)
	kp, lp, data := s.keyPath(key), s.leasePath(key), encode(identity, ttl, sid, c.Value)
	version := int32(-1)
	if prev.st != nil {
		version = prev.st.Version
	}
	floor := s.seen.Highest(key)
	// Whether the last grant's session lives, asked beside the grant.
	last := decode(prev.data)
	alive := make(chan bool, 1)
	if prev.st != nil && last.Session != 0 {
		go func() {
			ok, _, err := g.conn.Exists(s.markerPath(key, last.Session))
			alive <- ok || err != nil // unknown: assume the worst
		}()
	} else {
		alive <- false
	}
	for attempt := 0; ; attempt++ {
		sent := time.Now()
		res, err := call(ctx, func() ([]zk.MultiResponse, error) {
			return g.conn.Multi(
				&zk.CreateRequest{Path: lp, Data: data, Acl: s.acl, Flags: zk.FlagEphemeral},
				&zk.CreateRequest{Path: g.marker, Acl: s.acl, Flags: zk.FlagEphemeral},
				&zk.SetDataRequest{Path: kp, Data: data, Version: version})
		})
		err = multiErr(res, err)
		switch {
		case err == nil && len(res) == 3 && res[2].Stat != nil:
			g.term, g.version = uint64(res[2].Stat.Mzxid), res[2].Stat.Version
			if !g.start(sent) {
				why := g.lost()
				g.end(false)
				return tenure.Lease{}, s.fail(ctx, "acquire", key, errors.New("the grant ended at once: "+why))
			}
			l := tenure.Lease{Key: key, Identity: identity, Term: g.term, TTL: ttl, Token: g.token, Value: c.Value}
			switch {
			case <-alive: // deleted from outside: its holder may not know
				l.Wait = seen.WaitSince(sent0, time.Duration(last.TTL))
			case prev.st == nil && floor.Term > 0: // the key node is gone
				l.Wait = seen.WaitSince(sent0, floor.TTL)
			}
			s.seen.Observe(key, l.Term, ttl)
			return l, nil
		case err == nil:
			g.end(false)
			return tenure.Lease{}, s.fail(ctx, "acquire", key, errors.New("unexpected multi-operation response"))
		case errors.Is(err, zk.ErrNoNode) && attempt == 0:
			if err := s.ensure(ctx, g.conn, kp); err != nil {
				g.end(false)
				return tenure.Lease{}, s.fail(ctx, "acquire (create the key node)", key, err)
			}
		case errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion):
			g.end(false)
			return tenure.Lease{}, errRace
		default:
			// Closing the session also undoes a grant whose reply was lost.
			g.end(false)
			return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
		}
	}
}

// ensure creates the persistent node p and its ancestors if they are
// missing.
func (s *Store) ensure(ctx context.Context, conn *zk.Conn, p string) error {
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i := range parts {
		node := "/" + strings.Join(parts[:i+1], "/")
		_, err := call(ctx, func() (string, error) { return conn.Create(node, nil, 0, s.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
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
	if !g.extend(sent) {
		return fmt.Errorf("%w: key %q term %d ended: %s", tenure.ErrLost, l.Key, l.Term, g.lost())
	}
	return nil
}

// Release implements [tenure.Store]: a read checks that the key node's
// zxid is still this grant's term, then one multi-operation checks that
// its version is still this grant's and deletes the lease node and the
// grant's marker; the grant's session is then closed.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	g, err := s.held(ctx, l)
	if err != nil {
		return err
	}
	// A key node deleted and created again from outside starts counting
	// versions afresh: check its zxid first, then its version in the multi.
	st, err := call(ctx, func() (*zk.Stat, error) {
		_, st, err := g.conn.Exists(s.keyPath(l.Key))
		return st, err
	})
	switch {
	case err != nil:
		return s.failGrant(ctx, "release", g, l, err)
	case st == nil || uint64(st.Mzxid) != g.term:
		return superseded(g, l)
	}
	res, err := call(ctx, func() ([]zk.MultiResponse, error) {
		return g.conn.Multi(
			&zk.CheckVersionRequest{Path: s.keyPath(l.Key), Version: g.version},
			&zk.DeleteRequest{Path: s.leasePath(l.Key), Version: -1},
			&zk.DeleteRequest{Path: g.marker, Version: -1})
	})
	switch err = multiErr(res, err); {
	case err == nil:
		g.end(false)
		return nil
	case errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode):
		return superseded(g, l)
	default:
		return s.failGrant(ctx, "release", g, l, err)
	}
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
}

// readNode reads the key node through the control session.
func (s *Store) readNode(ctx context.Context, key string) (node, error) {
	if _, err := s.session(ctx); err != nil {
		return node{}, err
	}
	got, err := call(ctx, func() (node, error) {
		data, st, err := s.ctl.Get(s.keyPath(key))
		return node{data, st}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return node{}, nil
	}
	return got, err
}

// read reads the key node through the control session. Its data names the
// last grant, its Mzxid is that grant's term, its version counts grants,
// and it has a child while the key is held.
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
	if n.st.NumChildren > 0 {
		rec := decode(n.data)
		r.Holder, r.TTL, r.Value = rec.Holder, time.Duration(rec.TTL), rec.Value
		if r.Holder == "" {
			r.Holder = unknownHolder // held, but the node was not written by tenure
		}
		r.Remaining = r.TTL // an upper bound: see the package doc
	}
	return s.seen.Record(r)
}
