package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/storetest"
)

// pubsubClients counts the server's connections in pub/sub mode.
func pubsubClients(t *testing.T, srv *testserver.RedisServer) int {
	t.Helper()
	list, err := client(t, srv).ClientList(ctxFor(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " flags=P ") {
			n++
		}
	}
	return n
}

// Every watch of a Store shares one connection, which closes with the
// last watch; when it fails, every watch on it ends, and new watches use
// a new connection.
func TestWatchesShareOneConnection(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	ctx, cancel := context.WithCancel(ctxFor(t))
	var chans []<-chan struct{}
	for range 50 {
		ch, err := st.Watch(ctx, randomKey())
		if err != nil {
			t.Fatal(err)
		}
		<-ch
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range ch {
			}
		}()
		chans = append(chans, done)
	}
	if n := pubsubClients(t, srv); n != 1 {
		t.Fatalf("50 watches use %d pub/sub connections, want 1", n)
	}
	if err := client(t, srv).Do(ctxFor(t), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	for i, done := range chans {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("watch %d still open after its connection was killed", i)
		}
	}
	key := randomKey()
	l, err := st.Acquire(ctxFor(t), key, "alpha", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := st.Watch(ctx, key)
	if err != nil {
		t.Fatalf("Watch after the shared connection failed: %v", err)
	}
	storetest.Await(t, ch, time.Second, "the grant", func(r tenure.Record) bool { return r.Held() })
	if err := st.Release(ctxFor(t), l); err != nil {
		t.Fatal(err)
	}
	storetest.AwaitEnd(t, ch, l, time.Second, "the release")
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for pubsubClients(t, srv) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the shared connection stayed open after the last watch ended")
		}
		time.Sleep(20 * time.Millisecond) // the server notices the close
	}
}

// Watches of one key that come and go (as a candidate's do, round after
// round) leave the shared connection subscribed to the key whenever a
// watch is on: a later watch sees the next change.
func TestWatchAgainAndAgain(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	key := randomKey()
	keep, stopKeep := context.WithCancel(ctxFor(t))
	defer stopKeep()
	if _, err := st.Watch(keep, randomKey()); err != nil { // keeps the connection open
		t.Fatal(err)
	}
	for range 100 {
		storetest.WatchOnce(t, st, key)
	}
	ch, err := st.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	l, err := st.Acquire(ctxFor(t), key, "alpha", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, time.Second, "the grant", func(r tenure.Record) bool { return r.Term == l.Term })
}
