package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// asker is the [transport.Asker] of lowest, bully and ring: a StatusQuery
// frame (from [wire.ObserverID], a random nonce in Ref) on one persistent
// connection per member, authenticated by the same handshake as members'
// connections (as [wire.ObserverID]), answered by the member's node
// through its [Transport] with a StatusReply echoing the nonce. Replies
// are authenticated under the connection's session key, in sequence, and
// matched to the nonce, so an old reply cannot be passed off as new.
type asker struct {
	gk          groupKey
	dialTimeout time.Duration
	incarnation uint64
	pool        *transport.Pool[*askConn]
}

// askConn is an authenticated status connection to one member.
type askConn struct {
	id   uint64
	conn net.Conn
	s    *session
}

func (c *askConn) Close() error { return c.conn.Close() }

// NewAsker returns the [transport.Asker] an observer of the group in cfg
// uses to ask members over TCP: cfg.Secret, Key, Algorithm and Group must
// be the members' (the group key derives from them); the other fields are
// ignored. It does not connect yet; Ask dials each member on first use
// and keeps the connection.
func NewAsker(cfg Config) (transport.Asker, error) {
	gk, err := deriveGroupKey(cfg.Secret, cfg.Key, cfg.Algorithm, cfg.Group)
	if err != nil {
		return nil, err
	}
	a := &asker{gk: gk, dialTimeout: time.Second, incarnation: rand.Uint64() | 1}
	a.pool = transport.NewPool(cfg.Group, a.dial, func(err error) bool { return errors.Is(err, wire.ErrBadMAC) })
	return a, nil
}

// Ask implements [transport.Asker] on the asker's pool: a connection the
// member closed while idle is replaced once, unless the reply failed
// authentication.
func (a *asker) Ask(ctx context.Context, id uint64) (transport.Report, error) {
	q := func(ctx context.Context, c *askConn) (transport.Report, error) {
		r, _, err := a.query(ctx, c, wire.Message{Type: wire.StatusQuery})
		return r, err
	}
	return transport.Query(ctx, a.pool, id, q)
}

// StepDown implements [transport.StepDownAsker]: a [wire.StepDown] frame on
// the same authenticated connection as the queries, answered like one. As
// with a query, a kept connection the member closed meanwhile is replaced
// once, so the request may arrive twice; the coordinator takes the same
// request for its epoch once and answers the repeat as accepted.
func (a *asker) StepDown(ctx context.Context, id uint64, req transport.StepDownRequest) (transport.Report, bool, error) {
	var accepted bool
	q := func(ctx context.Context, c *askConn) (transport.Report, error) {
		r, ok, err := a.query(ctx, c, wire.Message{Type: wire.StepDown, LeaderEpoch: req.Epoch, Candidate: req.To, TTL: req.Window})
		accepted = ok
		return r, err
	}
	r, err := transport.Query(ctx, a.pool, id, q)
	return r, accepted, err
}

var _ transport.StepDownAsker = (*asker)(nil)

// dial connects to member id and authenticates as [wire.ObserverID].
func (a *asker) dial(ctx context.Context, id uint64, addr string) (*askConn, error) {
	d := net.Dialer{Timeout: a.dialTimeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return nil, a.pool.CtxErr(ctx)
		}
		return nil, err
	}
	s, err := a.handshake(ctx, conn, id)
	if err != nil {
		conn.Close()
		if errors.Is(err, wire.ErrBadMAC) {
			return nil, fmt.Errorf("the member failed authentication (is secret-file the members' secret?): %w", err)
		}
		return nil, a.ioErr(ctx, err)
	}
	return &askConn{id: id, conn: conn, s: s}, nil
}

// handshake authenticates conn to member id as [wire.ObserverID], within the
// dial timeout and ctx.
func (a *asker) handshake(ctx context.Context, conn net.Conn, id uint64) (*session, error) {
	dl := time.Now().Add(a.dialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return dialHandshake(conn, a.gk, wire.ObserverID, id)
}

// query sends request m (a StatusQuery or a StepDown; its type and fields
// are the caller's, the envelope and nonce are set here) on c and reads
// until the matching reply; accepted is the reply's [wire.FlagAccepted].
func (a *asker) query(ctx context.Context, c *askConn, m wire.Message) (r transport.Report, accepted bool, err error) {
	conn := c.conn
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	nonce := rand.Uint64()
	m.From, m.To, m.Incarnation, m.Ref = wire.ObserverID, c.id, a.incarnation, nonce
	if _, err := conn.Write(c.s.out.Seal(byte(m.Type), m)); err != nil {
		return transport.Report{}, false, a.ioErr(ctx, err)
	}
	buf := make([]byte, wire.MaxFrameLen)
	for {
		if _, err := io.ReadFull(conn, buf[:4]); err != nil {
			return transport.Report{}, false, a.ioErr(ctx, err)
		}
		size, err := wire.FrameSize(buf[:4])
		if err != nil {
			return transport.Report{}, false, fmt.Errorf("bad reply: %w", err)
		}
		if _, err := io.ReadFull(conn, buf[4:size]); err != nil {
			return transport.Report{}, false, a.ioErr(ctx, err)
		}
		_, got, err := c.s.in.Open(buf[:size])
		switch {
		case errors.Is(err, wire.ErrBadMAC):
			return transport.Report{}, false, fmt.Errorf("the reply failed authentication (is secret-file the members' secret?): %w", err)
		case err != nil:
			return transport.Report{}, false, fmt.Errorf("bad reply: %w", err)
		case got.Type != wire.StatusReply || got.From != c.id || got.To != wire.ObserverID || got.Ref != nonce:
			continue // an answer to an earlier query that timed out
		}
		m := got
		var since time.Time
		if m.Candidate != 0 && m.Candidate < 1<<62 {
			since = time.UnixMilli(int64(m.Candidate))
		}
		return transport.Report{Leader: m.Leader, LeaderEpoch: m.LeaderEpoch, Epoch: m.Epoch,
			TTL: max(m.TTL, 0), Remaining: max(m.Remaining, 0), Value: m.Value, Since: since,
			Priority: int(m.Priority), NeverLeads: m.Priority == 0}, m.Flags&wire.FlagAccepted != 0, nil
	}
}

// ioErr explains a failed read or write: the context's end, or a member
// that hung up, which is what a member does to a query it cannot
// authenticate.
func (a *asker) ioErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return a.pool.CtxErr(ctx)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
		return errors.New("the member closed the connection without answering (wrong secret-file, or a member running another tenure version)")
	}
	return err
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Close implements [transport.Asker]: in-flight queries fail and
// connections close.
func (a *asker) Close() error { return a.pool.Close() }
