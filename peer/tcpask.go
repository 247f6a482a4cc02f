package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
)

// tcpAsker is the [Asker] of lowest, bully and ring: a StatusQuery frame
// (from [ObserverID], a random nonce in Ref) on one persistent connection
// per member, authenticated by the same handshake as members' connections
// (as [ObserverID]), answered by the member's [TCP] transport with a
// StatusReply echoing the nonce. Replies are authenticated under the
// connection's session key, in sequence, and matched to the nonce, so an
// old reply cannot be passed off as new.
type tcpAsker struct {
	gk          groupKey
	dialTimeout time.Duration
	incarnation uint64
	conns       map[uint64]*askConn
	ctx         context.Context // cancelled by Close
	cancel      context.CancelFunc
}

// askConn is the connection to one member; sem (capacity 1) serialises its
// queries and guards conn.
type askConn struct {
	id   uint64
	addr string
	sem  chan struct{}
	conn net.Conn
	s    *session
}

func newTCPAsker(cfg Config) (*tcpAsker, error) {
	gk, err := deriveGroupKey(cfg.Secret, cfg.Key, cfg.Algorithm, cfg.Group)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &tcpAsker{gk: gk, dialTimeout: time.Second, incarnation: rand.Uint64() | 1,
		conns: map[uint64]*askConn{}, ctx: ctx, cancel: cancel}
	for _, m := range cfg.Group.Members() {
		a.conns[m.ID] = &askConn{id: m.ID, addr: m.Addr, sem: make(chan struct{}, 1)}
	}
	return a, nil
}

// Ask implements [Asker]. A connection the member closed while idle is
// replaced once.
func (a *tcpAsker) Ask(ctx context.Context, id uint64) (Report, error) {
	c := a.conns[id]
	if c == nil {
		return Report{}, invalidf("%d is not a member", id)
	}
	if a.ctx.Err() != nil {
		return Report{}, tenure.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.ctx, cancel)()
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return Report{}, a.ctxErr(ctx)
	}
	defer func() { <-c.sem }()
	for {
		fresh := c.conn == nil
		if fresh {
			d := net.Dialer{Timeout: a.dialTimeout}
			conn, err := d.DialContext(ctx, "tcp", c.addr)
			if err != nil {
				if ctx.Err() != nil {
					return Report{}, a.ctxErr(ctx)
				}
				return Report{}, err
			}
			if c.s, err = a.handshake(ctx, conn, c.id); err != nil {
				conn.Close()
				if errors.Is(err, ErrBadMAC) {
					return Report{}, fmt.Errorf("the member failed authentication (is secret-file the members' secret?): %w", err)
				}
				return Report{}, a.ioErr(ctx, err)
			}
			c.conn = conn
		}
		r, err := a.query(ctx, c)
		if err == nil {
			return r, nil
		}
		c.conn.Close()
		c.conn, c.s = nil, nil
		if fresh || ctx.Err() != nil || errors.Is(err, ErrBadMAC) {
			return Report{}, err
		}
	}
}

func (a *tcpAsker) ctxErr(ctx context.Context) error {
	if a.ctx.Err() != nil {
		return tenure.ErrClosed
	}
	return fmt.Errorf("no answer in time: %w", ctx.Err())
}

// handshake authenticates conn to member id as [ObserverID], within the
// dial timeout and ctx.
func (a *tcpAsker) handshake(ctx context.Context, conn net.Conn, id uint64) (*session, error) {
	dl := time.Now().Add(a.dialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	return dialHandshake(conn, a.gk, ObserverID, id)
}

// query sends one StatusQuery on c and reads until the matching reply.
func (a *tcpAsker) query(ctx context.Context, c *askConn) (Report, error) {
	conn := c.conn
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	} else {
		conn.SetDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	nonce := rand.Uint64()
	q := Message{Type: StatusQuery, From: ObserverID, To: c.id, Incarnation: a.incarnation, Ref: nonce}
	if _, err := conn.Write(c.s.out.seal(byte(StatusQuery), q)); err != nil {
		return Report{}, a.ioErr(ctx, err)
	}
	buf := make([]byte, MaxFrameLen)
	for {
		if _, err := io.ReadFull(conn, buf[:4]); err != nil {
			return Report{}, a.ioErr(ctx, err)
		}
		size, err := FrameSize(buf[:4])
		if err != nil {
			return Report{}, fmt.Errorf("bad reply: %w", err)
		}
		if _, err := io.ReadFull(conn, buf[4:size]); err != nil {
			return Report{}, a.ioErr(ctx, err)
		}
		_, m, err := c.s.in.open(buf[:size])
		switch {
		case errors.Is(err, ErrBadMAC):
			return Report{}, fmt.Errorf("the reply failed authentication (is secret-file the members' secret?): %w", err)
		case err != nil:
			return Report{}, fmt.Errorf("bad reply: %w", err)
		case m.Type != StatusReply || m.From != c.id || m.To != ObserverID || m.Ref != nonce:
			continue // an answer to an earlier query that timed out
		}
		return Report{Leader: m.Leader, LeaderEpoch: m.LeaderEpoch, Epoch: m.Epoch,
			TTL: max(m.TTL, 0), Remaining: max(m.Remaining, 0)}, nil
	}
}

// ioErr explains a failed read or write: the context's end, or a member
// that hung up, which is what a member does to a query it cannot
// authenticate.
func (a *tcpAsker) ioErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return a.ctxErr(ctx)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || isReset(err) {
		return errors.New("the member closed the connection without answering (wrong secret-file, or a member version without status queries)")
	}
	return err
}

func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Close implements [Asker]: in-flight queries fail and connections close.
func (a *tcpAsker) Close() error {
	a.cancel()
	for _, c := range a.conns {
		c.sem <- struct{}{}
		if c.conn != nil {
			c.conn.Close()
			c.conn = nil
		}
		<-c.sem
	}
	return nil
}
