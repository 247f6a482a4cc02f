package raft

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"

	"github.com/tenurehq/tenure/internal/ctxwait"
)

// serverName is the name every node's certificate carries and every dialer
// verifies: membership is proven by the CA signature, not by the name.
const serverName = "tenure-raft"

// handshakeTimeout bounds the handshakes (pre-authentication and TLS) of
// an incoming connection, so a peer that connects and says nothing cannot
// hold a goroutine for long.
const handshakeTimeout = 5 * time.Second

// maxHandshakes bounds the incoming connections in their handshakes at
// once; more are closed at once (counted in busy) until some finish.
const maxHandshakes = 64

// preauthKey derives from the shared secret the key of the
// pre-authentication that precedes TLS (see preauthDial), independent of
// the certificate authority's key.
func preauthKey(secret []byte) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, secret, []byte("tenure/peer/raft"), "pre-authentication key v1", 32)
	if err != nil {
		return nil, fmt.Errorf("raft: derive the pre-authentication key: %w", err)
	}
	return k, nil
}

// Pre-authentication, on the raw TCP connection before TLS:
//
//	dialer   -> acceptor  "TRA1" || nonce_d (32 random bytes)
//	acceptor -> dialer    nonce_a (32 random bytes)
//	dialer   -> acceptor  HMAC-SHA256(P, "dialer" || nonce_d || nonce_a)
//	acceptor -> dialer    HMAC-SHA256(P, "acceptor" || nonce_d || nonce_a)
//
// P is [preauthKey]. The acceptor sends nothing derived from the secret
// (neither its proof nor, in TLS, its certificate, whose signature a
// stranger could check guesses of the secret against) until the dialer
// proved it holds P; a connection that fails is closed. The dialer
// verifies the acceptor's proof before TLS too. TLS with certificates of
// the cluster's authority then authenticates both ends again and encrypts.
const preauthMagic = "TRA1"

func preauthMAC(psk []byte, role string, nd, na []byte) []byte {
	m := hmac.New(sha256.New, psk)
	m.Write([]byte(role))
	m.Write(nd)
	m.Write(na)
	return m.Sum(nil)
}

// errPreauth: the other end does not hold the cluster's secret.
var errPreauth = errors.New("raft: pre-authentication failed (is secret-file the members' secret?)")

// preauthDial runs the dialer's side on c within c's deadline.
func preauthDial(c net.Conn, psk []byte) error {
	hello := make([]byte, len(preauthMagic)+32)
	copy(hello, preauthMagic)
	rand.Read(hello[len(preauthMagic):])
	if _, err := c.Write(hello); err != nil {
		return err
	}
	na := make([]byte, 32)
	if _, err := io.ReadFull(c, na); err != nil {
		return err
	}
	nd := hello[len(preauthMagic):]
	if _, err := c.Write(preauthMAC(psk, "dialer", nd, na)); err != nil {
		return err
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, proof); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return errPreauth // the acceptor refused our proof
		}
		return err
	}
	if !hmac.Equal(proof, preauthMAC(psk, "acceptor", nd, na)) {
		return errPreauth
	}
	return nil
}

// preauthAccept runs the acceptor's side on c within c's deadline.
func preauthAccept(c net.Conn, psk []byte) error {
	hello := make([]byte, len(preauthMagic)+32)
	if _, err := io.ReadFull(c, hello); err != nil {
		return err
	}
	if string(hello[:len(preauthMagic)]) != preauthMagic {
		return fmt.Errorf("%w: not a tenure raft connection", errPreauth)
	}
	nd := hello[len(preauthMagic):]
	na := make([]byte, 32)
	rand.Read(na)
	if _, err := c.Write(na); err != nil {
		return err
	}
	proof := make([]byte, sha256.Size)
	if _, err := io.ReadFull(c, proof); err != nil {
		return err
	}
	if !hmac.Equal(proof, preauthMAC(psk, "dialer", nd, na)) {
		return errPreauth
	}
	_, err := c.Write(preauthMAC(psk, "acceptor", nd, na))
	return err
}

// clusterTLS derives the cluster's TLS configuration from the shared secret.
//
// The secret deterministically yields an Ed25519 certificate authority key
// (HKDF-SHA256), so every holder of the secret can sign certificates and
// none other can. Each node makes a fresh key and a certificate signed by
// that authority; both ends of every connection require and verify such a
// certificate (mutual TLS 1.3). A process without the secret can therefore
// neither connect to a node nor accept a node's connection, so it can
// neither vote nor lead, and the traffic is encrypted and integrity
// protected.
func clusterTLS(secret []byte) (*tls.Config, error) {
	seed, err := hkdf.Key(sha256.New, secret, []byte("tenure/peer/raft"), "cluster CA key v1", ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("raft: derive cluster key: %w", err)
	}
	caKey := ed25519.NewKeyFromSeed(seed)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "tenure raft cluster"},
		NotBefore:             time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("raft: make cluster CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("raft: parse cluster CA: %w", err)
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("raft: node key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, fmt.Errorf("raft: serial: %w", err)
	}
	now := time.Now()
	leafDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: serverName},
		DNSNames:     []string{serverName},
		NotBefore:    now.Add(-24 * time.Hour), // tolerate clock differences between members
		NotAfter:     now.Add(100 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, pub, caKey)
	if err != nil {
		return nil, fmt.Errorf("raft: node certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: key}},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ServerName:   serverName,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// tlsLayer is a [hraft.StreamLayer] whose connections have all completed
// the pre-authentication (see preauthDial) and a mutual TLS handshake with
// a member of the cluster. Handshakes of incoming connections run in their
// own goroutines, at most maxHS at once, so a slow or hostile client
// cannot stall Accept; an accept error (EMFILE...) is logged and retried
// with backoff, never the end of the listener.
type tlsLayer struct {
	ln           net.Listener
	conf         *tls.Config // for dialing: offers no application protocol
	srvConf      *tls.Config // for accepting: conf plus the status protocol
	psk          []byte      // pre-authentication key
	maxHS        int64       // concurrent incoming handshakes; 0: maxHandshakes
	status       atomic.Pointer[func() statusReply]
	stepDown     atomic.Pointer[func(stepDownReq) statusReply]
	logger       hclog.Logger
	conns        chan net.Conn
	done         chan struct{}
	once         sync.Once
	wg           sync.WaitGroup
	inHS         atomic.Int64 // incoming connections in their handshakes
	rejected     atomic.Int64 // incoming connections that failed the handshake
	busy         atomic.Int64 // incoming connections closed: too many handshakes
	acceptErrors atomic.Int64 // failed Accept calls (retried)
}

var _ hraft.StreamLayer = (*tlsLayer)(nil)

func listenTLS(addr string, conf *tls.Config, psk []byte, logger hclog.Logger) (*tlsLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raft: listen on %s: %w", addr, err)
	}
	return serveTLS(ln, conf, psk, logger, maxHandshakes), nil
}

// serveTLS starts a layer accepting on ln, with at most maxHS incoming
// handshakes at once.
func serveTLS(ln net.Listener, conf *tls.Config, psk []byte, logger hclog.Logger, maxHS int64) *tlsLayer {
	srv := conf.Clone()
	srv.NextProtos = []string{statusProto}
	l := &tlsLayer{ln: ln, conf: conf, srvConf: srv, psk: psk, maxHS: maxHS, logger: logger,
		conns: make(chan net.Conn), done: make(chan struct{})}
	l.wg.Add(1)
	go l.acceptLoop()
	return l
}

func (l *tlsLayer) acceptLoop() {
	defer l.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		raw, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.done:
				return // closing
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// EMFILE, ENFILE, ECONNABORTED...: wait and keep accepting.
			l.acceptErrors.Add(1)
			l.logger.Warn("raft: accept failed; retrying", "error", err, "in", backoff)
			select {
			case <-l.done:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if l.inHS.Add(1) > l.maxHS {
			l.inHS.Add(-1)
			l.busy.Add(1)
			raw.Close()
			continue
		}
		l.wg.Add(1)
		go l.handshake(raw)
	}
}

func (l *tlsLayer) handshake(raw net.Conn) {
	defer l.wg.Done()
	inHS := true
	done := func() {
		if inHS {
			inHS = false
			l.inHS.Add(-1)
		}
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	ctxwait.CancelOnClose(ctx, l.done, cancel)
	raw.SetDeadline(time.Now().Add(handshakeTimeout))
	err := preauthAccept(raw, l.psk)
	var c *tls.Conn
	if err == nil && stop() {
		raw.SetDeadline(time.Time{})
		c = tls.Server(raw, l.srvConf)
		err = c.HandshakeContext(ctx)
	} else if err == nil {
		err = ctx.Err()
	}
	done()
	if err != nil {
		select {
		case <-l.done:
			raw.Close()
			return // closing, not a refusal
		default:
		}
		l.rejected.Add(1) // before closing: whoever sees the close sees the count
		raw.Close()
		l.logger.Warn("rejected a raft connection that did not authenticate", "remote", raw.RemoteAddr().String(), "error", err)
		return
	}
	if c.ConnectionState().NegotiatedProtocol == statusProto {
		l.serveStatus(c)
		return
	}
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next authenticated incoming connection.
func (l *tlsLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close stops listening and waits for pending handshakes to give up.
func (l *tlsLayer) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		err = l.ln.Close()
		l.wg.Wait()
	})
	return err
}

// Addr is the listening address, which raft advertises.
func (l *tlsLayer) Addr() net.Addr { return l.ln.Addr() }

// Dial connects to address and completes the pre-authentication and the
// mutual TLS handshake within timeout.
func (l *tlsLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := dialCluster(ctx, string(address), l.conf, l.psk)
	if err != nil {
		return nil, fmt.Errorf("raft: connect to %s: %w", address, err)
	}
	return c, nil
}

// dialCluster connects to addr, pre-authenticates with psk and completes
// the TLS handshake with conf, all within ctx.
func dialCluster(ctx context.Context, addr string, conf *tls.Config, psk []byte) (*tls.Conn, error) {
	raw, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := preauthDial(raw, psk); err != nil {
		raw.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	c := tls.Client(raw, conf)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
}
