package raft

import (
	"context"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
)

// serverName is the name every node's certificate carries and every dialer
// verifies: membership is proven by the CA signature, not by the name.
const serverName = "tenure-raft"

// handshakeTimeout bounds the TLS handshake of an incoming connection, so a
// peer that connects and says nothing cannot hold a goroutine for long.
const handshakeTimeout = 5 * time.Second

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

// tlsLayer is a [hraft.StreamLayer] whose connections have all completed a
// mutual TLS handshake with a member of the cluster. Handshakes of incoming
// connections run in their own goroutines, so a slow or hostile client
// cannot stall Accept.
type tlsLayer struct {
	ln       net.Listener
	conf     *tls.Config // for dialing: offers no application protocol
	srvConf  *tls.Config // for accepting: conf plus the status protocol
	status   atomic.Pointer[func() statusReply]
	logger   hclog.Logger
	conns    chan net.Conn
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
	rejected atomic.Int64 // incoming connections that failed the handshake
}

var _ hraft.StreamLayer = (*tlsLayer)(nil)

func listenTLS(addr string, conf *tls.Config, logger hclog.Logger) (*tlsLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raft: listen on %s: %w", addr, err)
	}
	srv := conf.Clone()
	srv.NextProtos = []string{statusProto}
	l := &tlsLayer{ln: ln, conf: conf, srvConf: srv, logger: logger, conns: make(chan net.Conn), done: make(chan struct{})}
	l.wg.Add(1)
	go l.acceptLoop()
	return l, nil
}

func (l *tlsLayer) acceptLoop() {
	defer l.wg.Done()
	for {
		raw, err := l.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // listener closed
		}
		l.wg.Add(1)
		go l.handshake(raw)
	}
}

func (l *tlsLayer) handshake(raw net.Conn) {
	defer l.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	go func() {
		select {
		case <-l.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	c := tls.Server(raw, l.srvConf)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		select {
		case <-l.done:
			return // closing, not a refusal
		default:
		}
		l.rejected.Add(1)
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

// Dial connects to address and completes the mutual TLS handshake within
// timeout.
func (l *tlsLayer) Dial(address hraft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: l.conf}
	c, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, fmt.Errorf("raft: connect to %s: %w", address, err)
	}
	return c, nil
}
