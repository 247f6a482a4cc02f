package zk_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/zk"
	"github.com/tenurehq/tenure/storetest"
)

// One ZooKeeper server for the whole package: a JVM takes seconds to
// start. Tests that stop or restart it do not run in parallel, and every
// test uses keys of its own.
var shared = testserver.SharedZooKeeper()

func TestMain(m *testing.M) { shared.Main(m) }

// server returns the shared server, running.
func server(t testing.TB) *testserver.ZKServer {
	t.Helper()
	srv := shared.Get(t)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	return srv
}

func opener(srv *testserver.ZKServer, path string) func(t testing.TB) tenure.Store {
	return func(t testing.TB) tenure.Store {
		t.Helper()
		return storetest.OpenClosing(t, tenure.Open, "zk://"+srv.Addr+path)
	}
}

func TestConformance(t *testing.T) {
	srv := server(t)
	storetest.Run(t, storetest.Options{
		Open:      opener(srv, "/conformance"),
		TTL:       time.Second,
		Tolerance: 500 * time.Millisecond,
		Restart: func(t testing.TB) {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		},
		Tamper:   tamperOn(t, srv, "/conformance"),
		Sessions: true,
	})
}

func BenchmarkFailover(b *testing.B) {
	storetest.BenchFailover(b, storetest.BenchOptions{
		Open: opener(server(b), "/bench"),
		// The holder's connection dies without closing its session, so
		// ZooKeeper must expire it: the failover a crashed process gets.
		Crash: zk.Crash,
	})
}

// ctxT bounds a test's calls by d; see [storetest.Context].
func ctxT(t *testing.T, d time.Duration) context.Context { return storetest.Context(t, d) }

func open(t *testing.T, rawURL string) *zk.Store {
	t.Helper()
	return storetest.OpenClosing(t, zk.Open, rawURL)
}

// rawConn is a plain ZooKeeper client, to look at what the store wrote.
func rawConn(t *testing.T, srv *testserver.ZKServer) *gozk.Conn {
	t.Helper()
	c, _, err := gozk.Connect([]string{srv.Addr}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestLayout checks the mapping onto ZooKeeper: the lease node is
// ephemeral, owned by a session of the grant's own, the term is the zxid
// that created it, and odd keys stay single nodes.
func TestLayout(t *testing.T) {
	srv := server(t)
	st := open(t, "zk://"+srv.Addr+"/layout")
	raw := rawConn(t, srv)
	ctx := ctxT(t, 30*time.Second)
	for _, key := range []string{"jobs/nightly", ".", "..", "a/../b", "ключ %2F"} {
		l, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		children, _, err := raw.Children("/layout")
		if err != nil {
			t.Fatal(err)
		}
		var node string
		for _, c := range children {
			if ok, st, _ := raw.Exists("/layout/" + c + "/lease"); ok && uint64(st.Czxid) == l.Term {
				node = c
				if st.EphemeralOwner == 0 {
					t.Errorf("lease node of %q is not ephemeral", key)
				}
			}
		}
		if node == "" {
			t.Fatalf("no lease node created at term %d for %q among %v", l.Term, key, children)
		}
		if strings.ContainsAny(node, "/.") {
			t.Errorf("key %q became node name %q", key, node)
		}
		if err := st.Release(ctx, l); err != nil {
			t.Fatalf("Release(%q): %v", key, err)
		}
		if ok, _, _ := raw.Exists("/layout/" + node + "/lease"); ok {
			t.Errorf("lease node of %q still exists after Release", key)
		}
	}
}

// TestCloseEndsGrantsAtOnce checks that closing the store ends its grants
// without waiting for their TTL: their sessions are closed.
func TestCloseEndsGrantsAtOnce(t *testing.T) {
	srv := server(t)
	a, _ := zk.Open(context.Background(), "zk://"+srv.Addr+"/close")
	b := open(t, "zk://"+srv.Addr+"/close")
	ctx := ctxT(t, 30*time.Second)
	l, err := a.Acquire(ctx, "k", "alpha", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	l2, err := b.Acquire(ctx, "k", "beta", time.Second)
	if err != nil {
		t.Fatalf("Acquire right after the holder's store closed: %v", err)
	}
	if l2.Term <= l.Term {
		t.Fatalf("term went from %d to %d", l.Term, l2.Term)
	}
}

// TestTTLAboveServerMaximum checks that a TTL the server would shorten is
// refused rather than silently shortened.
func TestTTLAboveServerMaximum(t *testing.T) {
	srv := server(t)
	st := open(t, "zk://"+srv.Addr+"/maxttl")
	ctx := ctxT(t, 30*time.Second)
	_, err := st.Acquire(ctx, "k", "alpha", 2*time.Minute) // the server allows 60s
	if !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Acquire with a TTL above maxSessionTimeout: %v, want ErrInvalid", err)
	}
	if r, err := st.Get(ctx, "k"); err != nil || r.Held() {
		t.Fatalf("after the refused Acquire, Get = %+v, %v", r, err)
	}
	// A TTL below the minimum (2 ticks = 400ms) is raised, and works.
	l, err := st.Acquire(ctx, "k", "alpha", 100*time.Millisecond)
	if err != nil {
		t.Fatalf("Acquire with a TTL below minSessionTimeout: %v", err)
	}
	if l.TTL != 100*time.Millisecond {
		t.Fatalf("lease TTL %s, want the one asked for", l.TTL)
	}
}

// TestBadURLs checks URL validation.
func TestBadURLs(t *testing.T) {
	storetest.InvalidURLs(t, "", tenure.Open,
		"zk://",
		"zk://127.0.0.1/tenure",
		"zk://127.0.0.1:2181,nohost/tenure",
		"zk://127.0.0.1:2181/tenure?session=5s",
	)
	st := open(t, "zk://127.0.0.1:1,127.0.0.1:2")
	if st.Path() != zk.DefaultPath {
		t.Errorf("path %q, want %q", st.Path(), zk.DefaultPath)
	}
}

// TestForeignNodesLookHeld checks that a key whose nodes tenure did not
// write reads as held by "(unknown)" and that Acquire reports it held
// rather than spinning, while its lease node is owned by a live session
// (here a plain client's). A lease node that no session owns is no grant
// (see TestPersistentLeaseNode): once the lease node is made again without
// the ephemeral flag, Acquire takes the key, and since the node's data
// names no TTL, waits its own.
func TestForeignNodesLookHeld(t *testing.T) {
	srv := server(t)
	raw := rawConn(t, srv)
	root := "/foreign-" + strconv.FormatInt(time.Now().UnixNano(), 36) // its nodes outlive the test
	for _, p := range []string{root, root + "/k"} {
		if _, err := raw.Create(p, []byte("not json"), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	lp := root + "/k/lease"
	if _, err := raw.Create(lp, []byte("not json"), gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	st := open(t, "zk://"+srv.Addr+root)
	ctx := ctxT(t, 10*time.Second)
	_, err := st.Acquire(ctx, "k", "alpha", time.Second)
	var held *tenure.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "(unknown)" || held.Record.Term == 0 {
		t.Fatalf("Acquire of a key held by foreign nodes: %v, want HeldError naming (unknown)", err)
	}
	if err := raw.Delete(lp, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(lp, []byte("not json"), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	l, err := st.Acquire(ctx, "k", "alpha", time.Second)
	if err != nil || l.Wait < time.Second || l.Term <= held.Record.Term {
		t.Fatalf("Acquire of a key whose foreign lease node no session owns = %+v, %v; want a grant above term %d that waits 1s", l, err, held.Record.Term)
	}
}
