package raft

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
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
	a := &tlsAsker{conf: conf, psk: psk}
	a.pool = transport.NewPool(pc.Group, a.dial, nil)
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
	conf *tls.Config
	psk  []byte
	pool *transport.Pool[*askConn]
}

// askConn is the status connection to one member.
type askConn struct {
	conn *tls.Conn
	r    *bufio.Reader
}

func (c *askConn) Close() error { return c.conn.Close() }

// Ask implements [transport.Asker]: Leader is the raft leader's ID as member id
// knows it (0: none), LeaderEpoch and Epoch its current term. A connection
// the member closed while idle is replaced once.
func (a *tlsAsker) Ask(ctx context.Context, id uint64) (transport.Report, error) {
	s, err := transport.Query(ctx, a.pool, id, a.query)
	if err != nil {
		return transport.Report{}, err
	}
	return report(s)
}

func (a *tlsAsker) dial(ctx context.Context, _ uint64, addr string) (*askConn, error) {
	tc, err := dialCluster(ctx, addr, a.conf, a.psk)
	if err != nil {
		if ctx.Err() != nil {
			return nil, a.pool.CtxErr(ctx)
		}
		var ne *net.OpError
		if errors.As(err, &ne) && ne.Op == "dial" {
			return nil, err
		}
		if errors.Is(err, errPreauth) {
			return nil, err
		}
		return nil, fmt.Errorf("authentication failed (is secret-file the members' secret?): %w", err)
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != statusProto {
		tc.Close()
		return nil, errors.New("the member does not answer status queries (a version without them?)")
	}
	return &askConn{conn: tc, r: bufio.NewReaderSize(tc, maxStatusLine)}, nil
}

// StepDown implements [transport.StepDownAsker]: a step-down request on
// the status protocol (see status.go), answered like a status request. As
// with a query, a kept connection the member closed meanwhile is replaced
// once, so the request may arrive twice; the leader takes the same
// request for its term once and answers the repeat as accepted.
func (a *tlsAsker) StepDown(ctx context.Context, id uint64, req transport.StepDownRequest) (transport.Report, bool, error) {
	line, err := json.Marshal(stepDownReq{Term: req.Epoch, To: idString(req.To), WindowMS: req.Window.Milliseconds()})
	if err != nil {
		return transport.Report{}, false, err
	}
	msg := append(append([]byte{stepDownRequest}, line...), '\n')
	s, err := transport.Query(ctx, a.pool, id, func(ctx context.Context, c *askConn) (statusReply, error) {
		return a.send(ctx, c, msg)
	})
	if err != nil {
		return transport.Report{}, false, err
	}
	r, err := report(s)
	if err == nil && !s.Accepted && s.Refused != "" {
		err = fmt.Errorf("refused: %s", s.Refused)
	}
	return r, s.Accepted, err
}

func idString(id uint64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatUint(id, 10)
}

var _ transport.StepDownAsker = (*tlsAsker)(nil)

// query sends one status request and reads one answer line, bounded by
// ctx.
func (a *tlsAsker) query(ctx context.Context, c *askConn) (statusReply, error) {
	return a.send(ctx, c, []byte{statusRequest})
}

// send writes one request and reads one answer line, bounded by ctx.
func (a *tlsAsker) send(ctx context.Context, c *askConn, req []byte) (statusReply, error) {
	conn := c.conn
	dl, _ := ctx.Deadline()
	conn.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := conn.Write(req); err != nil {
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
	r := transport.Report{LeaderEpoch: s.Term, Epoch: s.Term, Value: s.Value, Priority: tenure.DefaultPriority}
	if s.Priority != nil {
		r.Priority, r.NeverLeads = *s.Priority, *s.Priority == tenure.NeverLead
	}
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

func (a *tlsAsker) ioErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return a.pool.CtxErr(ctx)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the member closed the connection without answering")
	}
	return err
}

// Close implements [transport.Asker]: in-flight requests fail, connections close.
func (a *tlsAsker) Close() error { return a.pool.Close() }

var _ transport.Asker = (*tlsAsker)(nil)
