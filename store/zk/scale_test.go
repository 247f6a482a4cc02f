package zk_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
)

// mntr returns the server's "mntr" four-letter-word figures.
func mntr(t testing.TB, addr string) map[string]int64 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("mntr")); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "\t")
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); ok && err == nil {
			m[k] = n
		}
	}
	if _, ok := m["zk_packets_received"]; !ok {
		t.Fatalf("mntr answered no zk_packets_received: %q", b)
	}
	return m
}

// TestSessionThousandKeysDefaultConnLimit is issue 13's failing case: one
// process leading 1,000 keys on a server with ZooKeeper's default limit of
// 60 connections per client address. Through one Session every key is
// led within seconds, over two connections (the store's control session
// and the shared session). TENURE_ZK_SCALE_KEYS sets another number of
// keys.
func TestSessionThousandKeysDefaultConnLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a ZooKeeper server of its own; skipped with -short")
	}
	srv, err := testserver.StartZooKeeperMaxConns(t.TempDir(), 60)
	if errors.Is(err, testserver.ErrZooKeeperMissing) {
		testserver.Missing(t, "ZooKeeper", testserver.ZooKeeperInstall)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	st := open(t, "zk://"+srv.Addr+"/thousand")
	quiet := slog.New(slog.DiscardHandler)
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: 10 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("TENURE_ZK_SCALE_KEYS")); err == nil && v > 0 {
		n = v // e.g. 10000, the target
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leading := make(chan struct{}, n)
	var events eventCount
	var wg sync.WaitGroup
	began := time.Now()
	for i := range n {
		e, err := tenure.New(tenure.Config{Session: sess, Key: fmt.Sprintf("shard-%d", i), Identity: "alpha", Logger: quiet, OnEvent: events.on})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_ = e.Run(ctx, func(ctx context.Context) error {
				leading <- struct{}{}
				<-ctx.Done()
				return nil
			})
		})
	}
	timeout := time.After(60 * time.Second)
	for i := range n {
		select {
		case <-leading:
		case <-timeout:
			events.check(t, n)
			t.Fatalf("only %d of %d keys led after 60s", i, n)
		}
	}
	t.Logf("%d keys leading %s after the start, over one session", n, time.Since(began).Round(time.Millisecond))
	events.check(t, n)
	m := mntr(t, srv.Addr)
	if c := m["zk_num_alive_connections"]; c > 3 {
		t.Errorf("%d connections to the server, want the control session's and the session's", c)
	}
	t.Logf("server: %d connections, %d ephemeral nodes, %d watches", m["zk_num_alive_connections"], m["zk_ephemerals_count"], m["zk_watch_count"])
	cancel()
	wg.Wait()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if err := sess.Close(cctx); err != nil {
		t.Fatal(err)
	}
}

// eventCount counts the events of electors, and their failed Acquires by
// cause.
type eventCount struct {
	mu       sync.Mutex
	kinds    map[tenure.EventKind]int
	failures map[string]int
	lost     error // the first EventLost's
}

func (c *eventCount) on(ev tenure.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kinds == nil {
		c.kinds, c.failures = map[tenure.EventKind]int{}, map[string]int{}
	}
	c.kinds[ev.Kind]++
	var held *tenure.HeldError
	switch {
	case ev.Kind == tenure.EventLost:
		c.lost = cmp.Or(c.lost, ev.Err)
	case ev.Kind == tenure.EventAcquireFailed && errors.As(ev.Err, &held):
		c.failures["held by "+held.Record.Holder]++
	case ev.Kind == tenure.EventAcquireFailed:
		parts := strings.Split(ev.Err.Error(), ": ")
		c.failures[parts[len(parts)-1]]++
	}
}

// check fails t unless n electors were elected once and none lost.
func (c *eventCount) check(t *testing.T, n int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kinds[tenure.EventElected] != n || c.kinds[tenure.EventLost] != 0 {
		t.Errorf("events %v, want %d elected and nothing lost (first loss: %v)", c.kinds, n, c.lost)
	}
	t.Logf("events %v; failed acquisitions by cause %v", c.kinds, c.failures)
}
