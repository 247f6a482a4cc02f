package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/redis"
	"github.com/tenurehq/tenure/storetest"
)

// ctxFor bounds a test's call by 30 s.
func ctxFor(t testing.TB) context.Context { return storetest.Context(t, 30*time.Second) }

// open opens a store on rawURL, closed at the end of the test.
func open(t testing.TB, rawURL string) *redis.Store {
	t.Helper()
	return storetest.OpenClosing(t, redis.Open, rawURL)
}

// client is a plain go-redis client on srv, for looking behind the store.
func client(t testing.TB, srv *testserver.RedisServer) *goredis.Client {
	opt, err := goredis.ParseURL(srv.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func randomKey() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "k-" + hex.EncodeToString(b[:])
}

// The suite runs against a server that fsyncs its append-only file on
// every write, and restarts it with SIGKILL: terms must survive a crash.
func TestConformance(t *testing.T) {
	srv := testserver.Redis(t, true)
	storetest.Run(t, storetest.Options{
		Open: storetest.OpenURL(srv.URL(0)),
		Restart: func(t testing.TB) {
			if err := srv.Restart(); err != nil {
				t.Fatalf("restarting redis-server: %v", err)
			}
		},
		Tamper:   tamperOn(srv, redis.DefaultPrefix, 0),
		Sessions: true,
	})
}

// Without keyspace notifications (as on a managed Redis that refuses
// CONFIG) the suite still passes: expiries reach watchers by timer.
func TestConformanceWithoutKeyspaceEvents(t *testing.T) {
	srv := testserver.Redis(t, false)
	storetest.Run(t, storetest.Options{
		Open: func(t testing.TB) tenure.Store {
			return open(t, srv.URL(1)+"?"+redis.KeyspaceParam+"=false")
		},
		Sessions: true,
	})
	flags, err := client(t, srv).ConfigGet(ctxFor(t), "notify-keyspace-events").Result()
	if err != nil {
		t.Fatal(err)
	}
	if f := flags["notify-keyspace-events"]; f != "" {
		t.Fatalf("with %s=false the store changed notify-keyspace-events to %q", redis.KeyspaceParam, f)
	}
}

// The store adds what it needs to notify-keyspace-events and keeps what
// the operator set.
func TestKeyspaceEventsMerged(t *testing.T) {
	srv := testserver.Redis(t, false)
	c := client(t, srv)
	if err := c.ConfigSet(ctxFor(t), "notify-keyspace-events", "Eh").Err(); err != nil {
		t.Fatal(err)
	}
	st := open(t, srv.URL(0))
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	if _, err := st.Watch(ctx, randomKey()); err != nil {
		t.Fatal(err)
	}
	flags, err := c.ConfigGet(ctxFor(t), "notify-keyspace-events").Result()
	if err != nil {
		t.Fatal(err)
	}
	f := flags["notify-keyspace-events"]
	for _, want := range []string{"E", "h", "K", "x"} {
		if !strings.Contains(f, want) {
			t.Fatalf("notify-keyspace-events = %q, want it to contain %q", f, want)
		}
	}
}

// An expiry reaches a watcher through the keyspace notification alone:
// here the watcher's timer is far off because the record it read said so,
// and the lease key is then made to expire early behind the store's back.
func TestWatchWakesOnKeyspaceExpiry(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	key := randomKey()
	l, err := st.Acquire(ctxFor(t), key, "alpha", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := st.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Holder != "alpha" || r.Remaining < 59*time.Minute {
		t.Fatalf("first delivery %+v", r)
	}
	if err := client(t, srv).PExpire(ctxFor(t), st.Prefix()+":{"+key+"}:lease", 50*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	storetest.AwaitEnd(t, ch, l, 5*time.Second, "the expiry")
}

// The term counter outlives lease keys: after an expiry the next grant
// has the next term, and nothing of the lease is left behind.
func TestTermCounterOutlivesLease(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	c := client(t, srv)
	key := randomKey()
	l1, err := st.Acquire(ctxFor(t), key, "alpha", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(ctxFor(t), st.Prefix()+":{"+key+"}:lease").Result()
	if err != nil || ttl <= 0 || ttl > 50*time.Millisecond {
		t.Fatalf("lease key PTTL = %s, %v: want the grant's TTL, set on the server", ttl, err)
	}
	ch, err := st.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	for r := range ch {
		if !r.Held() {
			break
		}
	}
	if n, err := c.Exists(ctxFor(t), st.Prefix()+":{"+key+"}:lease").Result(); err != nil || n != 0 {
		t.Fatalf("lease key still exists after expiry: %d, %v", n, err)
	}
	if ttl, err := c.PTTL(ctxFor(t), st.Prefix()+":{"+key+"}:term").Result(); err != nil || ttl != -1 {
		t.Fatalf("term counter PTTL = %v, %v: want no expiry", ttl, err)
	}
	l2, err := st.Acquire(ctxFor(t), key, "beta", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Term != l1.Term+1 {
		t.Fatalf("term after expiry %d, want %d", l2.Term, l1.Term+1)
	}
}

// Prefixes and databases are separate lease namespaces.
func TestNamespaces(t *testing.T) {
	srv := testserver.Redis(t, false)
	a := open(t, srv.URL(0))
	b := open(t, srv.URL(0)+"?"+redis.PrefixParam+"=other")
	c := open(t, srv.URL(2))
	key := randomKey()
	for i, st := range []*redis.Store{a, b, c} {
		l, err := st.Acquire(ctxFor(t), key, fmt.Sprint("c", i), time.Minute)
		if err != nil {
			t.Fatalf("namespace %d: %v", i, err)
		}
		if l.Term != 1 {
			t.Fatalf("namespace %d: term %d, want 1", i, l.Term)
		}
	}
}

func TestBadURLs(t *testing.T) {
	storetest.InvalidURLs(t, "hunter2", func(ctx context.Context, u string) (tenure.Store, error) { return redis.Open(ctx, u) },
		"redis://:hunter2-secret@127.0.0.1:1/0?tenure_prefix=",
		"redis://:hunter2-secret@127.0.0.1:1/0?tenure_prefix=a%20b",
		"redis://:hunter2-secret@127.0.0.1:1/0?tenure_keyspace_events=maybe",
		"redis://:hunter2-secret@127.0.0.1:1/x",
		"redis://:hunter2-secret@127.0.0.1:1/0?no_such_option=1",
		"postgres://:hunter2-secret@127.0.0.1:1/0",
	)
}

// No error, whatever went wrong, quotes the password of the URL.
func TestNoPasswordInErrors(t *testing.T) {
	srv := testserver.Redis(t, false)
	const pw = "Sup3r-s3cret-pw"
	storetest.SecretHiddenURL(t, fmt.Sprintf("redis://:%s@%s/0", pw, srv.Addr), pw, "tenure/redis")
}

// With the server down, calls and Watch fail with an error naming the
// server, and a server that accepts connections but never answers cannot
// hold a call beyond its context.
func TestServerDown(t *testing.T) {
	const pw = "Sup3r-s3cret-pw"
	storetest.ServerDown(t, pw, func(hostport string) tenure.Store {
		return open(t, fmt.Sprintf("redis://:%s@%s/0", pw, hostport))
	})
}

// After a crash and restart of the server, the same store handle works
// again by itself, the term counter is intact, and an open watch either
// keeps working or closes so the caller re-watches.
func TestRecoversAfterRestart(t *testing.T) {
	srv := testserver.Redis(t, true)
	st := open(t, srv.URL(0))
	key := randomKey()
	l := storetest.Outage(t, st, key, srv.Kill)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	// The pooled connections the crash broke are noticed before use: the
	// first call succeeds.
	r, err := st.Get(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Get after the server came back: %v", err)
	}
	if r.Holder != "alpha" || r.Term != l.Term {
		t.Fatalf("record after a crash with appendfsync always: %+v", r)
	}
	ch, err := st.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	if err := st.Release(ctxFor(t), l); err != nil {
		t.Fatalf("Release after restart: %v", err)
	}
	storetest.AwaitEnd(t, ch, l, 5*time.Second, "the release after the restart")
	l2, err := st.Acquire(ctxFor(t), key, "beta", time.Minute)
	if err != nil || l2.Term != l.Term+1 {
		t.Fatalf("Acquire after restart: %+v, %v; want term %d", l2, err, l.Term+1)
	}
}

// Close ends open watches.
func TestCloseEndsWatches(t *testing.T) {
	srv := testserver.Redis(t, false)
	st, err := redis.Open(ctxFor(t), srv.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := st.Watch(context.Background(), randomKey())
	if err != nil {
		t.Fatal(err)
	}
	<-ch
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for range ch {
	}
	if _, err := st.Watch(context.Background(), "k"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Watch after Close: %v", err)
	}
}

// A server that refuses CONFIG, as managed Redis services often do: the
// store cannot enable keyspace notifications, and watches still deliver
// expiries, by timer.
func TestWatchWithoutConfigCommand(t *testing.T) {
	srv := testserver.Redis(t, false, "--rename-command", "CONFIG", "")
	refused := open(t, srv.URL(0))
	_, err := refused.Acquire(ctxFor(t), randomKey(), "alpha", time.Second)
	if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), redis.EvictionCheckParam+"=skip") {
		t.Fatalf("Acquire where CONFIG GET is refused: got %v, want ErrInvalid naming %s=skip", err, redis.EvictionCheckParam)
	}
	st := open(t, srv.URL(0)+"?"+redis.EvictionCheckParam+"=skip")
	key := randomKey()
	ch, err := st.Watch(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Watch on a server without CONFIG: %v", err)
	}
	if r := <-ch; r.Held() {
		t.Fatalf("first delivery %+v", r)
	}
	l, err := st.Acquire(ctxFor(t), key, "alpha", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Holder != "alpha" || r.Term != l.Term {
		t.Fatalf("delivery of the grant: %+v", r)
	}
	storetest.AwaitEnd(t, ch, l, 5*time.Second, "the expiry")
}

// Both schemes are registered; rediss:// selects TLS, which a plain
// server refuses, with an error that keeps the password out.
func TestSchemes(t *testing.T) {
	srv := testserver.Redis(t, false)
	st, err := tenure.Open(ctxFor(t), srv.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Get(ctxFor(t), "k"); err != nil {
		t.Fatalf("Get through redis://: %v", err)
	}
	tlsURL := "rediss" + strings.TrimPrefix(srv.URL(0), "redis")
	st2, err := tenure.Open(ctxFor(t), tlsURL)
	if err != nil {
		t.Fatalf("tenure.Open(rediss://...): %v", err)
	}
	defer st2.Close()
	ctx, cancel := context.WithTimeout(ctxFor(t), 500*time.Millisecond)
	defer cancel()
	_, err = st2.Get(ctx, "k")
	if err == nil {
		t.Fatal("a TLS connection to a plain-text server succeeded")
	}
	if strings.Contains(err.Error(), srv.Password) {
		t.Fatalf("error quotes the password: %v", err)
	}
}
