package zk

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxwait"
)

// grant is one grant held through this store: a ZooKeeper session of its
// own that owns the ephemeral lease node. The grant ends when the session
// disconnects, when nobody renewed it for its TTL, or on Release or Close.
type grant struct {
	s        *Store
	conn     *zk.Conn
	key      string
	identity string
	ttl      time.Duration
	term     uint64
	version  int32 // the key node's version right after this grant
	token    string
	marker   string // the grant's marker node (see Store.markerPath)

	ready chan struct{} // closed when the session is first established
	gate  *dialGate     // the session's connections

	mu        sync.Mutex
	sessionID int64
	ending    // ends the grant when not renewed for ttl; ended closed by endWhy
}

// newSession opens a session whose timeout is ttl and waits for it,
// bounded by ctx. It refuses a ttl above what the server grants.
func (s *Store) newSession(ctx context.Context, ttl time.Duration) (*grant, error) {
	g := &grant{s: s, ttl: ttl, ready: make(chan struct{}), ending: ending{ended: make(chan struct{})}, gate: &dialGate{}}
	conn, negotiated, err := s.dialSession(ttl, g.event, g.gate)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.conn = conn
	g.mu.Unlock()
	if g.lost() != "" { // ended by an event before conn was stored
		conn.Close()
		return nil, errors.New("the new ZooKeeper session ended at once")
	}
	if err := s.establish(ctx, conn, g.ready, negotiated, ttl); err != nil {
		g.end(false)
		return nil, err
	}
	g.mu.Lock()
	g.sessionID = conn.SessionID()
	g.mu.Unlock()
	return g, nil
}

// dialSession starts a ZooKeeper session with timeout ttl, whose events go
// to onEvent and whose connections go through gate. It returns at once,
// with the channel that receives the timeout the server negotiated.
func (s *Store) dialSession(ttl time.Duration, onEvent zk.EventCallback, gate *dialGate) (*zk.Conn, <-chan time.Duration, error) {
	negotiated := make(chan time.Duration, 1)
	conn, _, err := zk.Connect(s.servers, ttl,
		zk.WithLogger(logger{secret: s.secret, timeout: negotiated}),
		zk.WithEventCallback(onEvent),
		zk.WithDialer(cappedDialer(handshakeLimit(ttl), gate.dial)))
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	return conn, negotiated, nil
}

// establish waits until conn has its session (ready is closed), bounded by
// ctx, refuses a session timeout the server negotiated below ttl with an
// error matching [tenure.ErrInvalid], and adds the store's credentials.
func (s *Store) establish(ctx context.Context, conn *zk.Conn, ready <-chan struct{}, negotiated <-chan time.Duration, ttl time.Duration) error {
	if err := waitSession(ctx, conn, ready); err != nil {
		return err
	}
	// The client logs the negotiated timeout right after the session is
	// established; give it a moment, then go on (an older or newer client
	// may not log it: then the server's bounds are not checked here).
	select {
	case got := <-negotiated:
		if got < ttl {
			return fmt.Errorf("%w: ttl %s is above the ZooKeeper servers' maximum session timeout (they granted %s; raise maxSessionTimeout)",
				tenure.ErrInvalid, ttl, got)
		}
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return ctx.Err()
	}
	if s.auth != nil {
		if _, err := call(ctx, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", s.auth) }); err != nil {
			return fmt.Errorf("authenticate: %w", err)
		}
	}
	return nil
}

// dialGate dials a session's connections and can cut them all for good,
// leaving the session to expire on the server as a crashed process's
// would (tests use it to simulate crashes and partitions).
type dialGate struct {
	mu     sync.Mutex
	cut    bool
	paused bool // dials fail until resumed (tests)
	conns  []net.Conn
}

var errCut = errors.New("connection cut")

func (d *dialGate) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cut || d.paused {
		c.Close()
		return nil, errCut
	}
	d.conns = append(d.conns, c)
	return c, nil
}

// cutAll closes the session's connections without closing the session and
// makes every later dial fail.
func (d *dialGate) cutAll() { d.shut(&d.cut) }

// pause closes the session's connections and makes dials fail until the
// returned func is called: a network outage that the session survives.
func (d *dialGate) pause() (resume func()) {
	d.shut(&d.paused)
	return func() {
		d.mu.Lock()
		d.paused = false
		d.mu.Unlock()
	}
}

// shut sets *flag, d.cut or d.paused, so that dials fail, and closes the
// session's connections, all under d.mu: no dial slips in between. It
// blocks only for d.mu and the closes.
func (d *dialGate) shut(flag *bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	*flag = true
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

// takeSpare returns the spare session if it suits ttl and is connected,
// or nil. A candidate that was told the key is held gets a spare made for
// its next attempt, so that acquiring a key just released costs two round
// trips instead of a new session.
func (s *Store) takeSpare(ttl time.Duration) *grant {
	s.mu.Lock()
	g := s.spare
	s.spare = nil
	s.mu.Unlock()
	if g == nil {
		return nil
	}
	if g.ttl != ttl || g.lost() != "" || g.conn.State() != zk.StateHasSession {
		g.end(false)
		return nil
	}
	return g
}

// makeSpare makes a spare session with timeout ttl in the background,
// unless there is one or one is being made.
func (s *Store) makeSpare(ttl time.Duration) {
	s.mu.Lock()
	if s.closed || s.making || s.spare != nil && s.spare.ttl == ttl {
		s.mu.Unlock()
		return
	}
	s.making = true
	s.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), controlSessionTimeout)
		defer cancel()
		ctxwait.CancelOnClose(ctx, s.done, cancel)
		g, err := s.newSession(ctx, ttl)
		s.mu.Lock()
		s.making = false
		keep := err == nil && !s.closed
		var old *grant
		if keep {
			old, s.spare = s.spare, g
		}
		s.mu.Unlock()
		if old != nil {
			old.end(false)
		}
		if err == nil && !keep {
			g.end(false)
		}
	}()
}

// event is the session's event callback, run synchronously by the client:
// it must not block. It can run before newSession has stored the
// connection, for the first events.
func (g *grant) event(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	established := isClosed(g.ready)
	switch ev.State {
	case zk.StateHasSession:
		if !established {
			close(g.ready)
		} else if g.sessionID != 0 && g.conn.SessionID() != g.sessionID {
			// A new session cannot own the grant's node.
			go g.endWhy("its ZooKeeper session expired", false)
		}
	case zk.StateDisconnected, zk.StateExpired, zk.StateAuthFailed:
		// Suspended is lost: the holder steps down at once.
		if established {
			go g.endWhy("its ZooKeeper session was disconnected ("+ev.State.String()+")", false)
		}
	}
}

// start registers the established grant with the store and arms its
// expiry at sent+ttl, sent being when the acquiring request was sent. It
// reports false if the grant already ended or the store is closed.
func (g *grant) start(sent time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hasEnded() {
		return false
	}
	g.token = fmt.Sprintf("%x.%x", g.sessionID, g.term)
	s := g.s
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.grants[g.token] = g
	}
	s.mu.Unlock()
	if closed {
		return false
	}
	g.expiry = time.AfterFunc(time.Until(sent.Add(g.ttl)), func() {
		g.endWhy("it was not renewed within its TTL", false)
	})
	return true
}

// hasEnded reports whether the grant has ended.
func (g *grant) hasEnded() bool { return isClosed(g.ended) }

// isClosed reports whether ch, a channel that is only ever closed, is
// closed; it does not block.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// ending is how a grant and a store session end: once, for a reason, with
// their expiry timer stopped. Its fields are guarded by the mutex of the
// grant or session that holds it.
type ending struct {
	ended  chan struct{} // closed when it ends
	why    string        // why it ended; "" while it lives
	expiry *time.Timer   // ends it when not renewed (kept alive) in time
}

// endLocked ends e for why, closing ended and stopping the expiry timer,
// and reports true; if e had already ended it changes nothing and reports
// false. The caller holds the mutex that guards e.
func (e *ending) endLocked(why string) bool {
	if isClosed(e.ended) {
		return false
	}
	e.why = why
	close(e.ended)
	if e.expiry != nil {
		e.expiry.Stop()
	}
	return true
}

// closeConn closes a session's connection, which ends its ZooKeeper
// session: with wait it returns once the client closed the session (about
// a second at most), else it closes it in the background. A nil conn is
// left alone.
func closeConn(conn *zk.Conn, wait bool) {
	if conn == nil {
		return
	}
	if wait {
		conn.Close()
	} else {
		go conn.Close()
	}
}

// extend moves the grant's expiry to sent+ttl; it reports false if the
// grant has ended.
func (g *grant) extend(sent time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hasEnded() {
		return false
	}
	g.expiry.Reset(time.Until(sent.Add(g.ttl)))
	return true
}

// lost returns why the grant ended, or "" if it has not.
func (g *grant) lost() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !isClosed(g.ended) {
		return ""
	}
	return g.why
}

func (g *grant) end(wait bool) { g.endWhy("it was released", wait) }

// endWhy ends the grant: it leaves the store's table and its session is
// closed, which deletes its ephemeral node. With wait it returns once the
// client has closed the session (about a second at most); otherwise it
// closes it in the background.
func (g *grant) endWhy(why string, wait bool) {
	g.mu.Lock()
	if !g.endLocked(why) {
		g.mu.Unlock()
		return
	}
	token, conn := g.token, g.conn
	g.mu.Unlock()
	if token != "" {
		g.s.mu.Lock()
		delete(g.s.grants, token)
		g.s.mu.Unlock()
	}
	closeConn(conn, wait) // if nil, newSession closes it
}

// lookup returns the grant l names if this store holds it and it is still
// live, or an error matching ErrLost.
func (s *Store) lookup(l tenure.Lease) (*grant, error) {
	s.mu.Lock()
	g := s.grants[l.Token]
	s.mu.Unlock()
	if g == nil || g.key != l.Key || g.term != l.Term || g.identity != l.Identity || g.ttl != l.TTL {
		return nil, fmt.Errorf("%w: key %q term %d is not held through this store (expired, released, or its ZooKeeper session ended)",
			tenure.ErrLost, l.Key, l.Term)
	}
	if why := g.lost(); why != "" {
		return nil, fmt.Errorf("%w: key %q term %d ended: %s", tenure.ErrLost, l.Key, l.Term, why)
	}
	return g, nil
}

// multiErr returns the error of a multi-operation: the failing op's error
// where it is one the store acts on, else err.
func multiErr(res []zk.MultiResponse, err error) error {
	for _, r := range res {
		for _, known := range []error{zk.ErrNodeExists, zk.ErrNoNode, zk.ErrBadVersion, zk.ErrNoAuth} {
			if errors.Is(r.Error, known) {
				return known
			}
		}
	}
	return err
}
