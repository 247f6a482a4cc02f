//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package postgres

import (
	"net"
	"testing"
	"time"
)

// quiet must answer at once while another goroutine is blocked reading
// the same socket, as pgx's background reader can be on an idle pooled
// connection: it used to wait for that read to end, that is, for the
// server to send something, and so held the caller's call past its
// deadline.
func TestQuietBesideABlockedReader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-accepted
	if peer == nil {
		t.Fatal("accept failed")
	}

	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var b [1]byte
		_, _ = c.Read(b[:]) // blocks: the peer sends nothing yet
	}()
	// The reader holds the socket's read lock once it waits in the
	// poller; quiet must not wait for it.
	time.Sleep(50 * time.Millisecond) // no event says "blocked in Read"; a later start only makes the test pass vacuously
	answer := func(what string, want bool) {
		t.Helper()
		got := make(chan bool, 1)
		go func() { got <- quiet(c) }()
		select {
		case q := <-got:
			if q != want {
				t.Fatalf("%s: quiet = %v, want %v", what, q, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: quiet blocked behind the other goroutine's read", what)
		}
	}
	answer("an open, idle socket", true)

	// The peer closes: the reader sees the end of the stream, and so
	// does the peek (an end of file stays readable).
	peer.Close()
	<-readerDone
	answer("a socket the peer closed", false)
}
