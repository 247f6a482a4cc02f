package raft

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/transport"
)

// openObserver is the raft mode's observer (a peer URL without id): a
// [peer.Observer] that asks members over the status protocol (see
// status.go). It joins nothing: it is not in the raft configuration, has no
// vote and no log.
func openObserver(pc peer.Config) (tenure.Store, error) {
	if pc.Transport != nil {
		return nil, invalidf("the raft mode runs its own transport; Config.Transport must be nil")
	}
	if len(pc.Secret.Bytes()) < MinSecretLen {
		return nil, invalidf("the secret is %d bytes; at least %d are required", len(pc.Secret.Bytes()), MinSecretLen)
	}
	if _, err := options(pc); err != nil {
		return nil, err
	}
	conf, err := clusterTLS(pc.Secret.Bytes())
	if err != nil {
		return nil, err
	}
	conf.NextProtos = []string{statusProto}
	psk, err := preauthKey(pc.Secret.Bytes())
	if err != nil {
		return nil, err
	}
	a := &tlsAsker{conf: conf, psk: psk, conns: map[uint64]*askConn{}}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	for _, m := range pc.Group.Members() {
		a.conns[m.ID] = &askConn{id: m.ID, addr: m.Addr, sem: make(chan struct{}, 1)}
	}
	o, err := peer.NewObserver(pc, a)
	if err != nil {
		a.Close()
		return nil, err
	}
	return o.Store(), nil
}

// tlsAsker is the raft [transport.Asker]: one persistent status connection per
// member, mutual TLS with the cluster's authority.
type tlsAsker struct {
	conf   *tls.Config
	psk    []byte
	conns  map[uint64]*askConn
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
}

// askConn is the status connection to one member; sem (capacity 1)
// serialises its requests and guards conn and r.
type askConn struct {
	id   uint64
	addr string
	sem  chan struct{}
	conn *tls.Conn
	r    *bufio.Reader
}

// Ask implements [transport.Asker]: Leader is the raft leader's ID as member id
// knows it (0: none), LeaderEpoch and Epoch its current term. A connection
// the member closed while idle is replaced once.
func (a *tlsAsker) Ask(ctx context.Context, id uint64) (transport.Report, error) {
	c := a.conns[id]
	if c == nil {
		return transport.Report{}, invalidf("%d is not a member", id)
	}
	if a.ctx.Err() != nil {
		return transport.Report{}, tenure.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(a.ctx, cancel)()
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return transport.Report{}, a.ctxErr(ctx)
	}
	defer func() { <-c.sem }()
	for {
		fresh := c.conn == nil
		if fresh {
			if err := a.dial(ctx, c); err != nil {
				return transport.Report{}, err
			}
		}
		s, err := a.query(ctx, c)
		if err == nil {
			return report(s)
		}
		c.conn.Close()
		c.conn, c.r = nil, nil
		if fresh || ctx.Err() != nil {
			return transport.Report{}, err
		}
	}
}

func (a *tlsAsker) dial(ctx context.Context, c *askConn) error {
	tc, err := dialCluster(ctx, c.addr, a.conf, a.psk)
	if err != nil {
		if ctx.Err() != nil {
			return a.ctxErr(ctx)
		}
		var ne *net.OpError
		if errors.As(err, &ne) && ne.Op == "dial" {
			return err
		}
		if errors.Is(err, errPreauth) {
			return err
		}
		return fmt.Errorf("authentication failed (is secret-file the members' secret?): %w", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != statusProto {
		tc.Close()
		return errors.New("the member does not answer status queries (a version without them?)")
	}
	c.conn, c.r = tc, bufio.NewReaderSize(tc, maxStatusLine)
	return nil
}

// query sends one request and reads one answer line, bounded by ctx.
func (a *tlsAsker) query(ctx context.Context, c *askConn) (statusReply, error) {
	conn := c.conn
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write([]byte{statusRequest}); err != nil {
		return statusReply{}, a.ioErr(ctx, err)
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return statusReply{}, fmt.Errorf("raft: status answer longer than %d bytes", maxStatusLine)
		}
		return statusReply{}, a.ioErr(ctx, err)
	}
	return decodeStatus(bytes.TrimSpace(line))
}

// report turns a member's answer into a peer report. Peer member IDs are
// decimal, so a leader ID that is not is a bad answer.
func report(s statusReply) (transport.Report, error) {
	r := transport.Report{LeaderEpoch: s.Term, Epoch: s.Term}
	if s.Leader == "" {
		r.LeaderEpoch = 0
		return r, nil
	}
	id, err := transport.ParseID(s.Leader)
	if err != nil {
		return transport.Report{}, fmt.Errorf("raft: status answer names leader %q: %w", s.Leader, err)
	}
	r.Leader = id
	return r, nil
}

func (a *tlsAsker) ctxErr(ctx context.Context) error {
	if a.ctx.Err() != nil {
		return tenure.ErrClosed
	}
	return fmt.Errorf("no answer in time: %w", ctx.Err())
}

func (a *tlsAsker) ioErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return a.ctxErr(ctx)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the member closed the connection without answering")
	}
	return err
}

// Close implements [transport.Asker]: in-flight requests fail, connections close.
func (a *tlsAsker) Close() error {
	a.cancel()
	for _, c := range a.conns {
		c.sem <- struct{}{}
		if c.conn != nil {
			c.conn.Close()
			c.conn, c.r = nil, nil
		}
		<-c.sem
	}
	return nil
}

var _ transport.Asker = (*tlsAsker)(nil)
