package raft

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
)

// testLayer starts a layer for secret on ln (a loopback listener if nil)
// with at most maxHS handshakes, closed at the end of the test.
func testLayer(t *testing.T, secret []byte, ln net.Listener, maxHS int64) (*tlsLayer, *tlsLayer) {
	t.Helper()
	conf, err := clusterTLS(secret)
	if err != nil {
		t.Fatal(err)
	}
	psk, err := preauthKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	}
	l := serveTLS(ln, conf, psk, hclog.NewNullLogger(), maxHS)
	t.Cleanup(func() { l.Close() })
	return l, &tlsLayer{conf: conf, psk: psk}
}

// acceptOne dials l as member d and waits until l's Accept returns the
// connection.
func acceptOne(t *testing.T, l, d *tlsLayer) {
	t.Helper()
	got := make(chan net.Conn, 1)
	go func() {
		if c, err := l.Accept(); err == nil {
			got <- c
		}
	}()
	c, err := d.Dial(hraft.ServerAddress(l.Addr().String()), 5*time.Second)
	if err != nil {
		t.Fatalf("member dial: %v", err)
	}
	defer c.Close()
	c.Write([]byte("x")) // TLS 1.3: the server side completes on the first read
	select {
	case s := <-got:
		s.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the member's connection was not accepted")
	}
}

// TestTransportNothingBeforeAuth: a stranger that connects learns nothing
// derived from the secret. Speaking TLS straight away, it gets no
// certificate (nor any byte); going through the pre-authentication, it
// gets only the acceptor's 32-byte random nonce and then the connection
// closes when its proof fails.
func TestTransportNothingBeforeAuth(t *testing.T) {
	secret := newSecret(t)
	l, _ := testLayer(t, secret, nil, maxHandshakes)
	addr := l.Addr().String()

	var sawCert atomic.Bool
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	tc := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13,
		VerifyPeerCertificate: func(certs [][]byte, _ [][]*x509.Certificate) error {
			sawCert.Store(len(certs) > 0)
			return nil
		}})
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err == nil || sawCert.Load() {
		t.Fatalf("a stranger's TLS handshake: err %v, certificate revealed %t", err, sawCert.Load())
	}
	tc.Close()

	raw, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	hello := append([]byte(preauthMagic), make([]byte, 32)...)
	if _, err := raw.Write(hello); err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, 32)
	if _, err := io.ReadFull(raw, nonce); err != nil {
		t.Fatal(err)
	}
	raw.Write(make([]byte, 32)) // a proof without the secret
	rest, err := io.ReadAll(raw)
	if len(rest) != 0 || err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after a bad proof the stranger read %d more bytes (%v); want the connection closed", len(rest), err)
	}
	if got := l.rejected.Load(); got != 2 {
		t.Fatalf("rejected %d connections, want 2", got)
	}
}

// flakyListener fails its first n Accept calls with EMFILE, as a process
// out of file descriptors does.
type flakyListener struct {
	net.Listener
	n atomic.Int64
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if f.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE}
	}
	return f.Listener.Accept()
}

// TestTransportAcceptErrorBacksOff: accept errors (EMFILE) do not end the
// listener: it backs off and a member connects afterwards.
func TestTransportAcceptErrorBacksOff(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyListener{Listener: ln}
	fl.n.Store(5)
	l, member := testLayer(t, newSecret(t), fl, maxHandshakes)
	acceptOne(t, l, member)
	if got := l.acceptErrors.Load(); got != 5 {
		t.Fatalf("%d accept errors retried, want 5", got)
	}
}

// TestTransportHandshakeCap: with every handshake slot held by silent
// connections, a further connection is closed at once (not after the
// handshake timeout) and counted; once they are gone, members get in.
func TestTransportHandshakeCap(t *testing.T) {
	const maxHS = 3
	l, member := testLayer(t, newSecret(t), nil, maxHS)
	var silent []net.Conn
	for range maxHS {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		silent = append(silent, c)
	}
	for deadline := time.Now().Add(5 * time.Second); l.inHS.Load() < maxHS; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d handshakes in progress, want %d", l.inHS.Load(), maxHS)
		}
	}
	extra, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(handshakeTimeout / 2))
	if _, err := extra.Read(make([]byte, 1)); err == nil {
		t.Fatalf("read on a connection over the cap: %v", err)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("a connection over the handshake cap was kept waiting")
	}
	if got := l.busy.Load(); got != 1 {
		t.Fatalf("busy = %d, want 1", got)
	}
	for _, c := range silent {
		c.Close()
	}
	for deadline := time.Now().Add(5 * time.Second); l.inHS.Load() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d handshakes still in progress after their clients left", l.inHS.Load())
		}
	}
	acceptOne(t, l, member)
}
