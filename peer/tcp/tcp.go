package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// Config configures [Listen].
type Config struct {
	// Self is this member; it listens on Group.Addr(Self).
	Self  uint64
	Group transport.Group
	// Secret is the group's shared secret; required. The transport never
	// uses it directly: it derives the group key from it (HKDF-SHA256)
	// over Key, Algorithm and the member IDs, so every member must agree
	// on all four (see [Config]).
	Secret         Secret
	Key, Algorithm string
	// DialTimeout bounds each connection attempt and WriteTimeout each
	// write. Defaults 1s and 2s.
	DialTimeout, WriteTimeout time.Duration
	// AuthTimeout bounds the handshake of every connection, inbound or
	// outbound: one that has not authenticated by then is closed.
	// Default 2s.
	AuthTimeout time.Duration
	// IdleTimeout closes a member's inbound connection on which nothing
	// arrived for that long; the dialer sends a keepalive after a quarter
	// of it without traffic, so only a dead link goes idle. Default 10s.
	// Observer connections get max(IdleTimeout, 30s).
	IdleTimeout time.Duration
	// QueueLen is the number of messages queued per receiver before Send
	// drops; default 256.
	QueueLen int
	Logger   *slog.Logger
}

// Stats counts what a TCP transport did. Every frame or connection
// that is dropped is counted under the reason.
type Stats struct {
	Sent, Received uint64
	// BadMAC: failed authentication: a handshake proof or a frame MAC that
	// does not verify (a wrong secret, or a handshake recorded on another
	// connection and replayed). Malformed: a frame that does not parse, or
	// a bad length. Oversized: a length prefix above MaxFrameLen.
	// OtherGroup: a frame with another group's tag (a secret shared by
	// two groups or keys) or of another protocol version (a member or
	// observer of another tenure version; the first is logged). Stale: a frame whose
	// connection tag is another connection's (recorded earlier, before a
	// restart). Replayed: an authenticated frame out of sequence on its
	// connection. Misaddressed: a connection for another member or from a
	// non-member, a frame whose sender or receiver is not the
	// connection's, an election message from an observer, or a status
	// reply (members never ask).
	BadMAC, Malformed, Oversized, OtherGroup, Stale, Replayed, Misaddressed uint64
	// QueueFull: dropped because a queue was full (sending or receiving).
	// DialFailures: outgoing connections that failed to connect or to
	// authenticate. Rejected: inbound connections refused or evicted
	// because too many were open. AuthTimeouts: inbound connections closed
	// for not completing the handshake within AuthTimeout. IdleClosed:
	// inbound connections closed for silence (IdleTimeout). Superseded:
	// member connections closed because the same member authenticated a
	// newer one.
	QueueFull, DialFailures, Rejected, AuthTimeouts, IdleClosed, Superseded uint64
	// Queries: status queries answered (a reply written; see
	// [transport.Delivery]). They are also counted in Received.
	Queries uint64
}

type counters struct {
	sent, received, badMAC, malformed, oversized, otherGroup, stale, replayed, misaddressed,
	queueFull, dialFailures, rejected, authTimeouts, idleClosed, superseded, queries atomic.Uint64
}

// count counts the error that ended a connection's handshake or frame
// under its reason. A timeout is counted by the caller, which knows which
// deadline it was.
func (c *counters) count(err error) {
	for _, r := range []struct {
		err error
		n   *atomic.Uint64
	}{
		{wire.ErrBadMAC, &c.badMAC}, {wire.ErrFrameTooLarge, &c.oversized}, {wire.ErrOtherGroup, &c.otherGroup}, {wire.ErrVersion, &c.otherGroup},
		{wire.ErrStale, &c.stale}, {wire.ErrReplayed, &c.replayed}, {wire.ErrMalformed, &c.malformed},
		{errMisaddressed, &c.misaddressed},
	} {
		if errors.Is(err, r.err) {
			r.n.Add(1)
			return
		}
	}
}

// Transport is the authenticated TCP [transport.Transport]. Each member
// keeps one outgoing connection per other member, dialled on demand, and accepts connections
// from anyone; every connection starts with a handshake that proves both
// ends hold the group key and binds fresh nonces of both into every later
// frame's MAC (see dialHandshake), and only frames that authenticate on
// their connection, in sequence, and are addressed to this member get
// through. All methods are safe for concurrent use; Send never blocks.
//
// At most one inbound connection per member is kept: when a member
// authenticates a new one (after a restart, or a broken link), the older
// is closed. Inbound connections are bounded in number (4 per member);
// when every slot is taken, the oldest connection still in its handshake
// is evicted, or else the oldest observer connection, so neither strangers
// nor observers can keep members out.
//
// An observer's StatusQuery and StepDown frames (requests, see
// [wire.Type.IsRequest]) reach Recv like every message, with a reply
// channel; the transport writes the member's answer back on the
// connection the request came in on. An observer can send nothing else,
// so it is never heard as a member.
type Transport struct {
	cfg         Config
	gk          groupKey
	ln          net.Listener
	incarnation uint64
	recv        chan transport.Delivery
	peers       map[uint64]*outConn
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	c           counters
	// versionLogged: a connection of another protocol version was logged.
	versionLogged atomic.Bool

	closeOnce sync.Once
	mu        sync.Mutex
	closed    bool
	conns     map[net.Conn]*inbound
	members   map[uint64]net.Conn // the authenticated inbound connection of each member
}

var _ transport.Transport = (*Transport)(nil)

// Listen starts the transport: it listens on Group.Addr(Self) at once
// (so a bad address fails here) and dials members when first sending.
func Listen(cfg Config) (*Transport, error) {
	if cfg.Secret.IsZero() {
		return nil, invalidf("the TCP transport needs the shared secret")
	}
	addr := cfg.Group.Addr(cfg.Self)
	if addr == "" {
		return nil, invalidf("member %d has no address in the group", cfg.Self)
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 2 * time.Second
	}
	if cfg.AuthTimeout <= 0 {
		cfg.AuthTimeout = 2 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Second
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	gk, err := deriveGroupKey(cfg.Secret, cfg.Key, cfg.Algorithm, cfg.Group)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("peer: member %d listening on %s: %w", cfg.Self, addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{cfg: cfg, gk: gk, ln: ln, incarnation: rand.Uint64() | 1, recv: make(chan transport.Delivery, 1024),
		peers: map[uint64]*outConn{}, ctx: ctx, cancel: cancel,
		conns: map[net.Conn]*inbound{}, members: map[uint64]net.Conn{}}
	for _, m := range cfg.Group.Members() {
		if m.ID != cfg.Self {
			t.peers[m.ID] = &outConn{t: t, id: m.ID, addr: m.Addr, q: make(chan wire.Message, cfg.QueueLen)}
		}
	}
	for _, p := range t.peers {
		t.wg.Go(p.run)
	}
	t.wg.Go(t.accept)
	return t, nil
}

// Addr is the address the transport listens on.
func (t *Transport) Addr() net.Addr { return t.ln.Addr() }

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	c := &t.c
	return Stats{Sent: c.sent.Load(), Received: c.received.Load(), BadMAC: c.badMAC.Load(),
		Malformed: c.malformed.Load(), Oversized: c.oversized.Load(), OtherGroup: c.otherGroup.Load(),
		Stale: c.stale.Load(), Replayed: c.replayed.Load(), Misaddressed: c.misaddressed.Load(),
		QueueFull: c.queueFull.Load(), DialFailures: c.dialFailures.Load(), Rejected: c.rejected.Load(),
		AuthTimeouts: c.authTimeouts.Load(), IdleClosed: c.idleClosed.Load(), Superseded: c.superseded.Load(),
		Queries: c.queries.Load()}
}

// Recv implements [transport.Transport]. A member's node must read it: status
// queries arrive here too, and are answered only through their Reply.
func (t *Transport) Recv() <-chan transport.Delivery { return t.recv }

// Send implements [transport.Transport]: it queues m for m.To's connection, where
// it is signed with that connection's session key. It returns an error
// wrapping [transport.ErrUnreachable] while the last attempt to reach m.To failed
// recently (the message is not queued).
func (t *Transport) Send(m wire.Message) error {
	p := t.peers[m.To]
	if p == nil {
		return fmt.Errorf("%w: %d is not a member", transport.ErrUnreachable, m.To)
	}
	if t.ctx.Err() != nil {
		return fmt.Errorf("peer: transport closed")
	}
	if until := p.downUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		return fmt.Errorf("%w: member %d at %s did not accept a connection", transport.ErrUnreachable, m.To, p.addr)
	}
	m.From, m.Incarnation = t.cfg.Self, t.incarnation
	select {
	case p.q <- m:
		return nil
	default:
		t.c.queueFull.Add(1)
		return fmt.Errorf("peer: send queue to member %d is full", m.To)
	}
}

// Close implements [transport.Transport]: it closes the listener and every
// connection and waits for the transport's goroutines. It is idempotent.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.shut()
		t.wg.Wait()
		close(t.recv)
	})
	return nil
}

// shut marks the transport closed and closes its listener and
// connections, so its goroutines end.
func (t *Transport) shut() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.cancel()
	t.ln.Close()
	for c := range t.conns {
		c.Close()
	}
}

// outConn is the connection to one member and its writer goroutine.
type outConn struct {
	t         *Transport
	id        uint64
	addr      string
	q         chan wire.Message
	downUntil atomic.Int64 // unix nanoseconds; Send refuses until then
}

// link is one outgoing connection; dead is closed when it ended: the
// acceptor closed it (idle, superseded, restarted) or its Welcome failed.
type link struct {
	c    net.Conn
	s    *session
	dead chan struct{}
}

// dial connects to the member and authenticates, within DialTimeout and
// AuthTimeout. It returns once its proof is sent: frames follow it at
// once, and the link's reader checks the acceptor's Welcome (a link whose
// Welcome fails is closed, and counted under BadMAC).
func (p *outConn) dial() (*link, error) {
	t := p.t
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.addr)
	cancel()
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(t.ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	c.SetDeadline(time.Now().Add(t.cfg.AuthTimeout))
	s, welcome, err := dialProve(c, t.gk, t.cfg.Self, p.id)
	if err != nil {
		c.Close()
		t.c.count(err)
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	l := &link{c: c, s: s, dead: make(chan struct{})}
	// The acceptor sends nothing after its Welcome: reading on only
	// notices that it closed the link, so the next message goes on a new
	// connection instead of into a dead one.
	t.wg.Go(func() {
		defer close(l.dead)
		if err := readWelcome(c, t.gk, welcome); err != nil {
			t.c.count(err)
			c.Close()
			return
		}
		c.SetReadDeadline(time.Time{})
		io.Copy(io.Discard, c)
	})
	return l, nil
}

// run writes the queued messages to the member, dialling when there is
// something to send and no link, and sends a keepalive after
// IdleTimeout/4 of silence on a link.
func (p *outConn) run() {
	t := p.t
	var l *link
	defer func() {
		if l != nil {
			l.c.Close()
		}
	}()
	keepalive := time.NewTimer(t.cfg.IdleTimeout / 4)
	defer keepalive.Stop()
	backoff := 50 * time.Millisecond
	for {
		var m wire.Message
		kind := byte(0)
		var dead <-chan struct{}
		if l != nil {
			dead = l.dead
		}
		select {
		case <-t.ctx.Done():
			return
		case <-dead:
			l.c.Close()
			l = nil
			continue
		case m = <-p.q:
			kind = byte(m.Type)
		case <-keepalive.C:
			keepalive.Reset(t.cfg.IdleTimeout / 4)
			if l == nil {
				continue
			}
			kind, m = wire.KindKeepalive, wire.Message{From: t.cfg.Self, To: p.id}
		}
		if l != nil {
			select {
			case <-l.dead:
				l.c.Close()
				l = nil
			default:
			}
		}
		if l == nil {
			if kind == wire.KindKeepalive {
				continue
			}
			nl, err := p.dial()
			if err != nil {
				t.c.dialFailures.Add(1)
				p.downUntil.Store(time.Now().Add(backoff).UnixNano())
				backoff = min(backoff*2, time.Second)
				continue // the message is lost, as on a broken network
			}
			l, backoff = nl, 50*time.Millisecond
			p.downUntil.Store(0)
		}
		l.c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		if _, err := l.c.Write(l.s.out.Seal(kind, m)); err != nil {
			l.c.Close()
			l = nil
			p.downUntil.Store(time.Now().Add(backoff).UnixNano())
			continue
		}
		keepalive.Reset(t.cfg.IdleTimeout / 4)
		if kind != wire.KindKeepalive {
			t.c.sent.Add(1)
		}
	}
}

// maxInbound bounds open inbound connections: a few per member.
func (t *Transport) maxInbound() int { return 4 * t.cfg.Group.Len() }

// inbound is the state of one accepted connection.
type inbound struct {
	since  time.Time
	authed bool // its handshake completed
	member bool // a member authenticated it (not an observer)
}

// evictLocked closes the oldest connection still in its handshake, so
// strangers cannot keep members out by filling every slot; failing that,
// the oldest observer connection, so observers cannot keep members out
// either. Members hold at most one connection each, fewer than the slots.
func (t *Transport) evictLocked() {
	var oldest net.Conn
	var at time.Time
	for _, pass := range []func(*inbound) bool{
		func(in *inbound) bool { return !in.authed },
		func(in *inbound) bool { return !in.member },
	} {
		for c, in := range t.conns {
			if pass(in) && (oldest == nil || in.since.Before(at)) {
				oldest, at = c, in.since
			}
		}
		if oldest != nil {
			break
		}
	}
	if oldest != nil {
		t.c.rejected.Add(1) // counted before the close is seen
		oldest.Close()      // its reader removes it
		delete(t.conns, oldest)
	}
}

func (t *Transport) accept() {
	backoff := 5 * time.Millisecond
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// EMFILE and the like: wait and keep accepting.
			t.cfg.Logger.Warn("peer: accept failed; retrying", "id", t.cfg.Self, "err", err, "in", backoff)
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		t.mu.Lock()
		if !t.closed && len(t.conns) >= t.maxInbound() {
			t.evictLocked()
		}
		if t.closed || len(t.conns) >= t.maxInbound() {
			t.mu.Unlock()
			t.c.rejected.Add(1)
			c.Close()
			continue
		}
		t.conns[c] = &inbound{since: time.Now()}
		t.mu.Unlock()
		t.wg.Go(func() { t.read(c) })
	}
}

// frameReadTimeout bounds reading the rest of a frame once its length
// prefix arrived, so a slow or stuck sender cannot hold a reader forever.
const frameReadTimeout = 5 * time.Second

// observerIdle is the least time a connection that only carries status
// queries may stay silent before it is closed.
const observerIdle = 30 * time.Second

// read serves one accepted connection: it authenticates it ([Transport.admit]),
// then repeats three steps per frame until the connection fails, goes
// idle or carries a bad frame: framing ([Transport.nextFrame]), authentication
// and replay checking ([Transport.authenticate]), and dispatch to the member
// ([Transport.dispatch]). It closes the connection at the end: a sender that
// cannot authenticate does not get to keep one.
func (t *Transport) read(c net.Conn) {
	s := t.admit(c)
	defer t.forget(c, s)
	if s == nil {
		return
	}
	idle := t.cfg.IdleTimeout
	if s.peer == wire.ObserverID {
		idle = max(idle, observerIdle)
	}
	buf := make([]byte, wire.MaxFrameLen)
	for {
		b, err := t.nextFrame(c, buf, idle)
		if err != nil {
			return
		}
		m, ok, err := t.authenticate(s, b)
		if err != nil {
			t.c.count(err)
			return
		}
		if ok && !t.dispatch(c, s, m) {
			return
		}
	}
}

// admit runs the acceptor's handshake on c within AuthTimeout and
// registers the connection: a member's newest authenticated connection
// replaces its older one. It returns nil, having counted why, if the
// handshake failed or c was evicted meanwhile.
func (t *Transport) admit(c net.Conn) *session {
	c.SetDeadline(time.Now().Add(t.cfg.AuthTimeout))
	s, err := acceptHandshake(c, t.gk, t.cfg.Self, func(from uint64) bool {
		return from == wire.ObserverID || (from != t.cfg.Self && t.cfg.Group.Has(from))
	})
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.c.authTimeouts.Add(1)
		}
		t.c.count(err)
		if errors.Is(err, wire.ErrVersion) && t.versionLogged.CompareAndSwap(false, true) {
			t.cfg.Logger.Warn("peer: refused a connection from another tenure version (logged once)", "id", t.cfg.Self, "err", err)
		}
		return nil
	}
	c.SetWriteDeadline(time.Time{})
	member := s.peer != wire.ObserverID
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.conns[c]
	if in == nil { // evicted or closing meanwhile
		return nil
	}
	in.authed, in.member = true, member
	if member {
		if old := t.members[s.peer]; old != nil && old != c {
			t.c.superseded.Add(1)
			old.Close() // the newest authenticated connection wins
			delete(t.conns, old)
		}
		t.members[s.peer] = c
		// A member that just connected is up: messages to it go out at
		// once, not only once the redial backoff its downtime built up
		// (up to a second) has passed.
		if p := t.peers[s.peer]; p != nil {
			p.downUntil.Store(0)
		}
	}
	return s
}

// forget closes c and removes it from the transport's books.
func (t *Transport) forget(c net.Conn, s *session) {
	t.mu.Lock()
	delete(t.conns, c)
	if s != nil && t.members[s.peer] == c {
		delete(t.members, s.peer)
	}
	t.mu.Unlock()
	c.Close()
}

// nextFrame reads one whole frame from c into buf: the length prefix
// within idle (a connection silent that long is dead: counted as
// IdleClosed), then the rest within frameReadTimeout.
func (t *Transport) nextFrame(c net.Conn, buf []byte, idle time.Duration) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(idle))
	if _, err := io.ReadFull(c, buf[:4]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.c.idleClosed.Add(1)
		}
		return nil, err
	}
	size, err := wire.FrameSize(buf[:4])
	if err != nil {
		t.c.count(err)
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(frameReadTimeout))
	if _, err := io.ReadFull(c, buf[4:size]); err != nil {
		return nil, err
	}
	return buf[:size], nil
}

// authenticate opens frame b on session s: MAC, connection tag and
// sequence number (replays), then the addresses, which must be the
// connection's. ok is false for a keepalive, which carries nothing. An
// error ends the connection.
func (t *Transport) authenticate(s *session, b []byte) (m wire.Message, ok bool, err error) {
	kind, m, err := s.in.Open(b)
	switch {
	case err != nil:
		return wire.Message{}, false, err
	case kind == wire.KindKeepalive:
		return wire.Message{}, false, nil
	case m.From != s.peer || m.To != t.cfg.Self:
		return wire.Message{}, false, fmt.Errorf("%w: frame %d->%d on %d's connection", errMisaddressed, m.From, m.To, s.peer)
	}
	return m, true, nil
}

// dispatch hands an authenticated message to the member through Recv, the
// one path for everything it receives. Observers may only ask, and members
// never reply to the transport, so such messages are dropped (counted as
// Misaddressed). A request (a status query or a step-down) is delivered
// with a reply channel and its answer written back on c; dispatch reports
// false if that write failed.
func (t *Transport) dispatch(c net.Conn, s *session, m wire.Message) bool {
	query := m.Type.IsRequest()
	if !query && (m.Type == wire.StatusReply || s.peer == wire.ObserverID) {
		t.c.misaddressed.Add(1) // members never ask; observers never vote
		return true
	}
	d := transport.Delivery{Message: m}
	var reply chan wire.Message
	if query {
		reply = make(chan wire.Message, 1)
		d.Reply = reply
	}
	select {
	case t.recv <- d:
		t.c.received.Add(1)
	default:
		t.c.queueFull.Add(1)
		return true
	}
	if !query {
		return true
	}
	wait := time.NewTimer(t.cfg.WriteTimeout)
	defer wait.Stop()
	select {
	case r := <-reply:
		r.Type, r.From, r.To, r.Incarnation = wire.StatusReply, t.cfg.Self, m.From, t.incarnation
		t.c.queries.Add(1) // before the write: the asker may look at once
		c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		_, err := c.Write(s.out.Seal(byte(wire.StatusReply), r))
		return err == nil
	case <-wait.C:
		return true // unanswered: the observer's query times out
	case <-t.ctx.Done():
		return false
	}
}
