package peer

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
)

// TCPConfig configures [ListenTCP].
type TCPConfig struct {
	// Self is this member; it listens on Group.Addr(Self).
	Self  uint64
	Group Group
	// Secret authenticates every frame; required.
	Secret Secret
	// DialTimeout bounds each connection attempt and WriteTimeout each
	// write. Defaults 1s and 2s.
	DialTimeout, WriteTimeout time.Duration
	// QueueLen is the number of frames queued per receiver before Send
	// drops; default 256.
	QueueLen int
	Logger   *slog.Logger
}

// TCPStats counts what a TCP transport did. Every frame that is dropped is
// counted under the reason.
type TCPStats struct {
	Sent, Received uint64
	// BadMAC: failed authentication (wrong or no secret). Malformed: a
	// frame that authenticated but does not parse, or a bad length.
	// Oversized: a length prefix above MaxFrameLen. Replayed: an
	// (incarnation, sequence) already seen. Misaddressed: for another
	// member, from a non-member (except status queries), or a status reply
	// (members never ask).
	BadMAC, Malformed, Oversized, Replayed, Misaddressed uint64
	// QueueFull: dropped because a queue was full (sending or receiving).
	// DialFailures: connection attempts that failed. Rejected: inbound
	// connections refused because too many were open.
	QueueFull, DialFailures, Rejected uint64
	// Queries: status queries answered (a reply written; see
	// [TCP.SetReporter]). They are also counted in Received.
	Queries uint64
}

type tcpCounters struct {
	sent, received, badMAC, malformed, oversized, replayed, misaddressed, queueFull, dialFailures, rejected, queries atomic.Uint64
}

// TCP is the authenticated TCP [Transport]. Each member keeps one outgoing
// connection per other member, dialled on demand, and accepts connections
// from anyone; only frames that authenticate under the shared secret and
// are addressed to it get through. All methods are safe for concurrent use;
// Send never blocks.
//
// A TCP transport also answers an [Observer]'s StatusQuery frames itself,
// on the connection they came in on, with what its reporter says (see
// [TCP.SetReporter]); queries never reach Recv, so an observer is never
// heard as a member.
type TCP struct {
	cfg         TCPConfig
	ln          net.Listener
	incarnation uint64
	seq         atomic.Uint64
	recv        chan Message
	peers       map[uint64]*outConn
	ctx         context.Context
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	c           tcpCounters
	reporter    atomic.Pointer[func() Report]

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]*inbound
	seen   map[uint64]*replayWindow
}

var _ Transport = (*TCP)(nil)

// ListenTCP starts the transport: it listens on Group.Addr(Self) at once
// (so a bad address fails here) and dials members when first sending.
func ListenTCP(cfg TCPConfig) (*TCP, error) {
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
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 256
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("peer: member %d listening on %s: %w", cfg.Self, addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCP{cfg: cfg, ln: ln, incarnation: rand.Uint64() | 1, recv: make(chan Message, 1024),
		peers: map[uint64]*outConn{}, ctx: ctx, cancel: cancel,
		conns: map[net.Conn]*inbound{}, seen: map[uint64]*replayWindow{}}
	for _, m := range cfg.Group.Members() {
		if m.ID != cfg.Self {
			t.peers[m.ID] = &outConn{t: t, id: m.ID, addr: m.Addr, q: make(chan []byte, cfg.QueueLen)}
		}
	}
	for _, p := range t.peers {
		t.wg.Go(p.run)
	}
	t.wg.Go(t.accept)
	return t, nil
}

// Addr is the address the transport listens on.
func (t *TCP) Addr() net.Addr { return t.ln.Addr() }

// Stats returns the transport's counters.
func (t *TCP) Stats() TCPStats {
	c := &t.c
	return TCPStats{Sent: c.sent.Load(), Received: c.received.Load(), BadMAC: c.badMAC.Load(),
		Malformed: c.malformed.Load(), Oversized: c.oversized.Load(), Replayed: c.replayed.Load(),
		Misaddressed: c.misaddressed.Load(), QueueFull: c.queueFull.Load(),
		DialFailures: c.dialFailures.Load(), Rejected: c.rejected.Load(), Queries: c.queries.Load()}
}

// Report is a member's answer to a status query: the coordinator it follows
// (Leader 0: none) and that coordinator's epoch, the highest epoch it
// knows, and its record's TTL and Remaining (see [Node.Get]).
type Report struct {
	Leader, LeaderEpoch, Epoch uint64
	TTL, Remaining             time.Duration
}

// SetReporter makes the transport answer status queries with f's result; f
// is called from the connection's reader goroutine, must be safe for
// concurrent use and must not block. Until it is set, queries are dropped
// unanswered. [NewNode] sets it to the node's view.
func (t *TCP) SetReporter(f func() Report) { t.reporter.Store(&f) }

// Recv implements [Transport].
func (t *TCP) Recv() <-chan Message { return t.recv }

// Send implements [Transport]: it signs m and queues it for m.To's
// connection. It returns an error wrapping [ErrUnreachable] while the last
// attempt to reach m.To failed recently (the frame is not queued).
func (t *TCP) Send(m Message) error {
	p := t.peers[m.To]
	if p == nil {
		return fmt.Errorf("%w: %d is not a member", ErrUnreachable, m.To)
	}
	if t.ctx.Err() != nil {
		return fmt.Errorf("peer: transport closed")
	}
	if until := p.downUntil.Load(); until != 0 && time.Now().UnixNano() < until {
		return fmt.Errorf("%w: member %d at %s did not accept a connection", ErrUnreachable, m.To, p.addr)
	}
	// Number and queue under the receiver's lock, so frames reach each
	// receiver in sequence order even when Send is called concurrently.
	p.mu.Lock()
	defer p.mu.Unlock()
	m.From, m.Incarnation, m.Seq = t.cfg.Self, t.incarnation, t.seq.Add(1)
	select {
	case p.q <- Encode(t.cfg.Secret, m):
		return nil
	default:
		t.c.queueFull.Add(1)
		return fmt.Errorf("peer: send queue to member %d is full", m.To)
	}
}

// Close implements [Transport]: it closes the listener and every connection
// and waits for the transport's goroutines.
func (t *TCP) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.cancel()
	t.ln.Close()
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	close(t.recv)
	return nil
}

// outConn is the connection to one member and its writer goroutine.
type outConn struct {
	t         *TCP
	id        uint64
	addr      string
	q         chan []byte
	mu        sync.Mutex
	downUntil atomic.Int64 // unix nanoseconds; Send refuses until then
}

func (p *outConn) run() {
	t := p.t
	var conn net.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	backoff := 50 * time.Millisecond
	for {
		var frame []byte
		select {
		case <-t.ctx.Done():
			return
		case frame = <-p.q:
		}
		if conn == nil {
			ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.addr)
			cancel()
			if err != nil {
				t.c.dialFailures.Add(1)
				p.downUntil.Store(time.Now().Add(backoff).UnixNano())
				backoff = min(backoff*2, time.Second)
				continue // the frame is lost, as on a broken network
			}
			conn, backoff = c, 50*time.Millisecond
			p.downUntil.Store(0)
		}
		conn.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
		if _, err := conn.Write(frame); err != nil {
			conn.Close()
			conn = nil
			p.downUntil.Store(time.Now().Add(backoff).UnixNano())
			continue
		}
		t.c.sent.Add(1)
	}
}

// maxInbound bounds open inbound connections: a few per member.
func (t *TCP) maxInbound() int { return 4 * t.cfg.Group.Len() }

// inbound is the state of one accepted connection.
type inbound struct {
	since  time.Time
	authed bool // a frame authenticated on it
	member bool // a member's election frame came on it (not only queries)
}

// evictLocked closes the oldest connection on which no frame authenticated
// yet, so idle strangers cannot keep members out by filling every slot;
// failing that, the oldest connection that only carried status queries, so
// observers cannot keep members out either.
func (t *TCP) evictLocked() {
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
		oldest.Close() // its reader removes it
		delete(t.conns, oldest)
		t.c.rejected.Add(1)
	}
}

func (t *TCP) accept() {
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
			t.cfg.Logger.Warn("peer: accept failed", "id", t.cfg.Self, "err", err)
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
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

// observerIdle is how long a connection that only carried status queries
// may stay silent before it is closed.
const observerIdle = 30 * time.Second

// read receives frames from one inbound connection until it fails or a
// frame is bad, then closes it: a sender that cannot authenticate does not
// get to keep a connection. Status queries are answered on the connection.
func (t *TCP) read(c net.Conn) {
	defer func() {
		t.mu.Lock()
		delete(t.conns, c)
		t.mu.Unlock()
		c.Close()
	}()
	buf := make([]byte, MaxFrameLen)
	// A connection must authenticate its first frame promptly; afterwards
	// it may stay idle (followers can be silent for long).
	c.SetReadDeadline(time.Now().Add(frameReadTimeout))
	authed, member := false, false
	for {
		switch {
		case member:
			c.SetReadDeadline(time.Time{})
		case authed:
			c.SetReadDeadline(time.Now().Add(observerIdle))
		}
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			return
		}
		size, err := FrameSize(buf[:4])
		if err != nil {
			if errors.Is(err, ErrFrameTooLarge) {
				t.c.oversized.Add(1)
			} else {
				t.c.malformed.Add(1)
			}
			return
		}
		c.SetReadDeadline(time.Now().Add(frameReadTimeout))
		if _, err := io.ReadFull(c, buf[4:size]); err != nil {
			return
		}
		m, err := Decode(t.cfg.Secret, buf[:size])
		if err == nil && !authed {
			authed = true
			t.mu.Lock()
			if in := t.conns[c]; in != nil {
				in.authed = true
			}
			t.mu.Unlock()
		}
		switch {
		case errors.Is(err, ErrBadMAC):
			t.c.badMAC.Add(1)
			return
		case err != nil:
			t.c.malformed.Add(1)
			return
		case m.Type == StatusQuery:
			if m.To != t.cfg.Self {
				t.c.misaddressed.Add(1)
				continue
			}
			if !t.fresh(m) {
				t.c.replayed.Add(1)
				continue
			}
			if !t.answer(c, m) {
				return
			}
			continue
		case m.Type == StatusReply:
			t.c.misaddressed.Add(1) // members never ask
			continue
		case m.To != t.cfg.Self || m.From == t.cfg.Self || !t.cfg.Group.Has(m.From):
			t.c.misaddressed.Add(1)
			continue
		case !t.fresh(m):
			t.c.replayed.Add(1)
			continue
		}
		if !member {
			member = true
			t.mu.Lock()
			if in := t.conns[c]; in != nil {
				in.member = true
			}
			t.mu.Unlock()
		}
		select {
		case t.recv <- m:
			t.c.received.Add(1)
		default:
			t.c.queueFull.Add(1)
		}
	}
}

// answer writes the reply to status query q on c. It reports false if the
// connection failed. Without a reporter the query is dropped.
func (t *TCP) answer(c net.Conn, q Message) bool {
	t.c.received.Add(1)
	f := t.reporter.Load()
	if f == nil {
		return true
	}
	r := (*f)()
	reply := Message{Type: StatusReply, From: t.cfg.Self, To: q.From, Incarnation: t.incarnation, Seq: t.seq.Add(1),
		Epoch: r.Epoch, Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, Ref: q.Ref, TTL: r.TTL, Remaining: r.Remaining}
	t.c.queries.Add(1)
	c.SetWriteDeadline(time.Now().Add(t.cfg.WriteTimeout))
	_, err := c.Write(Encode(t.cfg.Secret, reply))
	return err == nil
}

// replayWindow remembers, for one sender, the highest sequence number seen
// under each of its recent incarnations.
type replayWindow struct {
	max   map[uint64]uint64
	order []uint64 // incarnations, oldest first
}

// maxIncarnations bounds the incarnations remembered per member, and
// maxObserverIncarnations those of all non-members together (observers:
// every `tenure status` run is a new incarnation).
const (
	maxIncarnations         = 16
	maxObserverIncarnations = 1024
)

// fresh reports whether m's (incarnation, sequence) is newer than any seen
// from its sender, and records it. Senders that are not members (observers)
// share one window, keyed ObserverID.
func (t *TCP) fresh(m Message) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	from, limit := m.From, maxIncarnations
	if !t.cfg.Group.Has(from) {
		from, limit = ObserverID, maxObserverIncarnations
	}
	w := t.seen[from]
	if w == nil {
		w = &replayWindow{max: map[uint64]uint64{}}
		t.seen[from] = w
	}
	last, known := w.max[m.Incarnation]
	if known && m.Seq <= last {
		return false
	}
	if !known {
		if len(w.order) == limit {
			delete(w.max, w.order[0])
			w.order = w.order[1:]
		}
		w.order = append(w.order, m.Incarnation)
	}
	w.max[m.Incarnation] = m.Seq
	return true
}
