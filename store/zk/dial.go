package zk

import (
	"net"
	"time"
)

// cappedDialer returns a dialer whose connections never wait longer than
// limit for a read or a write. The client waits up to ten times its
// receive timeout for the server's answer to a session handshake; a server
// that accepted the connection while still starting up (after a restart,
// say) may never answer it, and the handle would then stay without a
// session for that long, over a minute for the control session. With the
// cap it gives up after limit and dials again.
func cappedDialer(limit time.Duration, next func(network, address string, timeout time.Duration) (net.Conn, error)) func(network, address string, timeout time.Duration) (net.Conn, error) {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := next(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return cappedConn{Conn: c, limit: limit}, nil
	}
}

// handshakeLimit is the longest wait for one answer on a session of the
// given timeout: the client's own receive timeout (two thirds of the
// session timeout), at least a second.
func handshakeLimit(session time.Duration) time.Duration {
	return max(session*2/3, time.Second)
}

func netDial(network, address string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout(network, address, timeout)
}

// cappedConn brings every deadline set on it to at most limit from now; a
// zero deadline (none) stays none.
type cappedConn struct {
	net.Conn
	limit time.Duration
}

func (c cappedConn) capped(t time.Time) time.Time {
	if latest := time.Now().Add(c.limit); !t.IsZero() && t.After(latest) {
		return latest
	}
	return t
}

func (c cappedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.capped(t)) }
func (c cappedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.capped(t)) }
func (c cappedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.capped(t)) }
