package raft

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRepeatedRaftLinesAreHeldBack: while a member is down, raft logs a
// failed heartbeat to it every 250 ms and a failed append about as often;
// the writer passes the first of each kind, then one a minute that says
// how many it held back, and still passes other kinds and other members'
// lines at once.
func TestRepeatedRaftLinesAreHeldBack(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	w := newSlogWriter(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})), func() time.Time { return now })
	write := func(line string) {
		if n, err := fmt.Fprintln(w, line); err != nil || n != len(line)+1 {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	heartbeat := func(peer, backoff, cause string) string {
		return "[ERROR] raft: failed to heartbeat to: peer=" + peer + " backoff time=" + backoff + " error=\"" + cause + "\""
	}
	const refused = "dial tcp 127.0.0.1:7003: connect: connection refused"
	// 2.5 minutes of a member down: 600 heartbeat lines, the backoff and
	// the cause varying.
	for i := range 600 {
		backoff, cause := "250ms", refused
		if i < 5 {
			backoff, cause = "10ms", "msgpack decode error [pos 5847]: read: connection reset by peer"
		}
		write(heartbeat("127.0.0.1:7003", backoff, cause))
		if i == 10 {
			write(heartbeat("127.0.0.1:7002", "10ms", refused)) // another member: passed at once
			write("[WARN] raft: heartbeat timeout reached, starting election: last-leader-addr= last-leader-id=")
		}
		if i < 3 {
			write(fmt.Sprintf("[WARN] raft: failed to contact: server-id=3 time=%dms", 500*(i+1)))
		}
		now = now.Add(250 * time.Millisecond)
	}
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		`level=ERROR msg="raft: failed to heartbeat to: peer=127.0.0.1:7003 backoff time=10ms error=\"msgpack decode error [pos 5847]: read: connection reset by peer\""`,
		`level=WARN msg="raft: failed to contact: server-id=3 time=500ms"`,
		`level=ERROR msg="raft: failed to heartbeat to: peer=127.0.0.1:7002 backoff time=10ms error=\"` + refused + `\""`,
		`level=WARN msg="raft: heartbeat timeout reached, starting election: last-leader-addr= last-leader-id="`,
		`level=ERROR msg="raft: failed to heartbeat to: peer=127.0.0.1:7003 backoff time=250ms error=\"` + refused + `\"" repeated=239`,
		`level=ERROR msg="raft: failed to heartbeat to: peer=127.0.0.1:7003 backoff time=250ms error=\"` + refused + `\"" repeated=239`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestRepeatKindsAreBounded: lines of ever new kinds (a member address
// per line) never grow the writer's memory past maxRepeatKinds.
func TestRepeatKindsAreBounded(t *testing.T) {
	w := newSlogWriter(slog.New(slog.DiscardHandler), time.Now)
	for i := range 3 * maxRepeatKinds {
		fmt.Fprintf(w, "[ERROR] raft: failed to heartbeat to: peer=10.0.%d.%d:7001 error=x\n", i/256, i%256)
		if len(w.kinds) > maxRepeatKinds {
			t.Fatalf("after %d kinds of line the writer remembers %d", i+1, len(w.kinds))
		}
	}
}

// TestRefusedConnectionsAreOneKind: connections that fail to
// authenticate, each from its own address (a scan, a flood, a member with
// the wrong secret), are one kind of line: the first passes, then one a
// minute with the count, whatever the number of addresses.
func TestRefusedConnectionsAreOneKind(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	w := newSlogWriter(slog.New(slog.NewTextHandler(&out, nil)), func() time.Time { return now })
	for i := range 10000 {
		fmt.Fprintf(w, "[WARN]  raft: rejected a raft connection that did not authenticate: remote=10.%d.%d.%d:%d error=\"raft: pre-authentication failed (is secret-file the members' secret?)\"\n",
			i/65536, i/256%256, i%256, 1024+i)
		now = now.Add(10 * time.Millisecond)
	}
	if got := strings.Count(out.String(), "rejected a raft connection"); got != 2 {
		t.Errorf("10,000 refused connections over 100 s logged %d lines, want 2 (the first, then one a minute):\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "repeated=5999") {
		t.Errorf("the minute's line does not count the others:\n%s", out.String())
	}
}
