package redis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/redis"
	"github.com/tenurehq/tenure/storetest"
)

func wantHeldBy(t testing.TB, st *redis.Store, l tenure.Lease) tenure.Record {
	t.Helper()
	r, err := st.Get(ctxFor(t), l.Key)
	if err != nil {
		t.Fatal(err)
	}
	if r.Holder != l.Identity || r.Term != l.Term {
		t.Fatalf("Get(%q) = %+v, want held by %s in term %d", l.Key, r, l.Identity, l.Term)
	}
	return r
}

// A session lives through a crash of a server that fsyncs every write:
// its key and its grants' keys are on disk with their server-time expiry.
// While the server is down a keep-alive fails without claiming the session
// is lost; once it is back the keep-alive succeeds and every grant is
// still held. After a restart that lost everything, the keep-alive says
// the session is lost.
func TestSessionSurvivesRestart(t *testing.T) {
	srv := testserver.Redis(t, true)
	st, other := open(t, srv.URL(0)), open(t, srv.URL(0))
	ss := storetest.OpenSession(t, st, 20*time.Second)
	l1 := storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	l2 := storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctxFor(t), 2*time.Second)
	_, err := ss.KeepAlive(ctx)
	cancel()
	if err == nil || errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive with the server down: got %v, want a network error, not ErrLost", err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if gone, err := ss.KeepAlive(ctxFor(t)); err != nil || len(gone) != 0 {
		t.Fatalf("KeepAlive after the server came back: %d gone, %v", len(gone), err)
	}
	wantHeldBy(t, other, l1)
	wantHeldBy(t, other, l2)

	mem := testserver.Redis(t, false)
	st2 := open(t, mem.URL(0))
	ss2 := storetest.OpenSession(t, st2, 20*time.Second)
	storetest.AcquireIn(t, ss2, randomKey(), "alpha", "")
	if err := mem.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := ss2.KeepAlive(ctxFor(t)); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive after a restart that lost the data: got %v, want ErrLost", err)
	}
	if _, err := ss2.Acquire(ctxFor(t), randomKey(), "alpha", ""); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Acquire in a session the server lost: got %v, want ErrLost", err)
	}
}

// Keep-alives racing releases: a grant released while keep-alives run is
// never reported gone, the released keys are free and the others held.
func TestSessionKeepAliveRacesRelease(t *testing.T) {
	srv := testserver.Redis(t, false)
	st, other := open(t, srv.URL(0)), open(t, srv.URL(0))
	ss := storetest.OpenSession(t, st, 20*time.Second)
	leases := make([]tenure.Lease, 200)
	for i := range leases {
		leases[i] = storetest.AcquireIn(t, ss, fmt.Sprintf("%s-%d", randomKey(), i), "alpha", "")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if gone, err := ss.KeepAlive(ctxFor(t)); err != nil || len(gone) != 0 {
				t.Errorf("KeepAlive racing releases: %d gone (%+v), %v", len(gone), gone, err)
				return
			}
		}
	}()
	for i := 0; i < len(leases); i += 2 {
		if err := ss.Release(ctxFor(t), leases[i]); err != nil {
			t.Errorf("Release: %v", err)
		}
	}
	close(stop)
	wg.Wait()
	for i, l := range leases {
		if i%2 == 1 {
			wantHeldBy(t, other, l)
			continue
		}
		if r, err := other.Get(ctxFor(t), l.Key); err != nil || r.Held() {
			t.Fatalf("Get of a released grant: %+v, %v", r, err)
		}
	}
	if gone, err := ss.KeepAlive(ctxFor(t)); err != nil || len(gone) != 0 {
		t.Fatalf("KeepAlive after the releases: %d gone, %v", len(gone), err)
	}
}

// Deleting the session's own key from outside ends every grant in it at
// once: the next keep-alive says the session is lost, and the next holder
// of a grant waits out the session's renew window, which the session's
// expiry key still records. Deleting the expiry key too (redis-cli --scan
// --pattern 'tenure:session:ID*' | xargs redis-cli del) leaves no record
// of that window: the next holder must then wait a whole TTL. Before, it
// took the expiry key's absence for a session that expired long ago, and
// started at once beside the old holder, which learns of its loss only at
// its next keep-alive.
func TestSessionKeyDeletedFromOutside(t *testing.T) {
	t.Run("SessionKey", func(t *testing.T) { sessionKeysDeleted(t, false) })
	t.Run("WithExpiryKey", func(t *testing.T) { sessionKeysDeleted(t, true) })
}

func sessionKeysDeleted(t *testing.T, withExp bool) {
	srv := testserver.Redis(t, false)
	st, other := open(t, srv.URL(0)), open(t, srv.URL(0))
	ttl := 5 * time.Second
	ss := storetest.OpenSession(t, st, ttl)
	l := storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	sent := time.Now()
	if _, err := ss.KeepAlive(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	c := client(t, srv)
	keys, err := c.Keys(ctxFor(t), st.Prefix()+":session:*").Result()
	if err != nil || len(keys) != 2 {
		t.Fatalf("session keys %v, %v: want the session and its expiry", keys, err)
	}
	for _, k := range keys {
		if withExp || len(k) < 4 || k[len(k)-4:] != ":exp" {
			if err := c.Del(ctxFor(t), k).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	acqSent := time.Now()
	next, err := other.Acquire(ctxFor(t), l.Key, "beta", time.Second)
	if err != nil {
		t.Fatalf("Acquire of a grant whose session key was deleted: %v", err)
	}
	if next.Term <= l.Term || acqSent.Add(next.Wait).Before(sent.Add(ttl)) || next.Wait > ttl+ttl/10+time.Second {
		t.Fatalf("the next grant has term %d and Wait %s: want a term above %d and a Wait covering the session's window up to %s",
			next.Term, next.Wait, l.Term, sent.Add(ttl).Sub(acqSent))
	}
	if _, err := ss.KeepAlive(ctxFor(t)); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("KeepAlive after the session key was deleted: got %v, want ErrLost", err)
	}
	if err := ss.Release(ctxFor(t), l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Release of a grant of the deleted session: got %v, want ErrLost", err)
	}
	wantHeldBy(t, other, next)
}

// A grant rewritten from outside, with another token or as another type
// of key, is reported gone by the next keep-alive, which keeps the others.
func TestSessionGrantRewrittenFromOutside(t *testing.T) {
	srv := testserver.Redis(t, false)
	st, other := open(t, srv.URL(0)), open(t, srv.URL(0))
	ss := storetest.OpenSession(t, st, 20*time.Second)
	l1 := storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	l2 := storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	l3 := storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	tamperOn(srv, redis.DefaultPrefix, 0).OverwriteGrant(t, l1.Key, "mallory")
	c := client(t, srv)
	if err := c.Set(ctxFor(t), st.Prefix()+":{"+l2.Key+"}:lease", "junk", 0).Err(); err != nil {
		t.Fatal(err)
	}
	gone, err := ss.KeepAlive(ctxFor(t))
	if err != nil {
		t.Fatalf("KeepAlive: %v", err)
	}
	terms := map[string]uint64{}
	for _, l := range gone {
		terms[l.Key] = l.Term
	}
	if len(gone) != 2 || terms[l1.Key] != l1.Term || terms[l2.Key] != l2.Term {
		t.Fatalf("KeepAlive reported gone %+v, want the grants of %q and %q", gone, l1.Key, l2.Key)
	}
	wantHeldBy(t, other, l3)
	if gone, err := ss.KeepAlive(ctxFor(t)); err != nil || len(gone) != 0 {
		t.Fatalf("a second KeepAlive: %d gone, %v", len(gone), err)
	}
}

// Get and watches see a session grant's remaining time as the session's:
// a keep-alive moves it, and without keep-alives the watch reports the
// end when the session expires, with no keyspace notification to help.
func TestSessionExpiryReachesWatchers(t *testing.T) {
	srv := testserver.Redis(t, false)
	st, other := open(t, srv.URL(0)), open(t, srv.URL(0)+"?"+redis.KeyspaceParam+"=false")
	ttl := 1500 * time.Millisecond
	ss := storetest.OpenSession(t, st, ttl)
	l := storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	time.Sleep(500 * time.Millisecond) // real server time passing is the point
	before := wantHeldBy(t, other, l)
	if _, err := ss.KeepAlive(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	after := wantHeldBy(t, other, l)
	if before.Remaining > ttl-400*time.Millisecond || after.Remaining < ttl-200*time.Millisecond || after.TTL != ttl {
		t.Fatalf("Remaining %s before a keep-alive and %s after (TTL %s): want the session's, moved by the keep-alive", before.Remaining, after.Remaining, after.TTL)
	}
	ch, err := other.Watch(ctxFor(t), l.Key)
	if err != nil {
		t.Fatal(err)
	}
	storetest.Await(t, ch, time.Second, "the session grant", func(r tenure.Record) bool { return r.Term == l.Term })
	ended := time.Now()
	storetest.AwaitEnd(t, ch, l, ttl+500*time.Millisecond, "the session's expiry")
	if late := time.Since(ended); late < ttl-400*time.Millisecond {
		t.Fatalf("the watch reported the end %s after the keep-alive, before the session's TTL %s", late, ttl)
	}
}

// Sessions need every key on one server: a server in cluster mode is
// refused with a clear error.
func TestSessionRefusedInClusterMode(t *testing.T) {
	srv := testserver.Redis(t, false, "--cluster-enabled", "yes")
	st := open(t, srv.URL(0))
	_, err := st.OpenSession(ctxFor(t), time.Second)
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("OpenSession on a server in cluster mode: got %v, want ErrUnsupported", err)
	}
}

// Bad arguments and a closed store give the contract's errors.
func TestSessionErrors(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	for _, ttl := range []time.Duration{0, -time.Second, time.Microsecond} {
		if _, err := st.OpenSession(ctxFor(t), ttl); !errors.Is(err, tenure.ErrInvalid) {
			t.Fatalf("OpenSession(%s): got %v, want ErrInvalid", ttl, err)
		}
	}
	ss := storetest.OpenSession(t, st, 10*time.Second)
	l := storetest.AcquireIn(t, ss, randomKey(), "alpha", "")
	if err := ss.Close(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.Acquire(ctxFor(t), "", "alpha", ""); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Acquire of an empty key after Close: got %v, want ErrInvalid", err)
	}
	for what, err := range map[string]error{
		"Acquire":   func() error { _, err := ss.Acquire(ctxFor(t), randomKey(), "alpha", ""); return err }(),
		"KeepAlive": func() error { _, err := ss.KeepAlive(ctxFor(t)); return err }(),
		"Release":   ss.Release(ctxFor(t), l),
		"Close":     ss.Close(ctxFor(t)),
	} {
		if !errors.Is(err, tenure.ErrLost) {
			t.Errorf("%s after Close: got %v, want ErrLost", what, err)
		}
	}
	ss2 := storetest.OpenSession(t, st, 10*time.Second)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ss2.KeepAlive(ctxFor(t)); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("KeepAlive after the store's Close: got %v, want ErrClosed", err)
	}
	if _, err := st.OpenSession(ctxFor(t), time.Second); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("OpenSession after the store's Close: got %v, want ErrClosed", err)
	}
}

// Electors leading many keys through one tenure.Session: all lead, a
// grant deleted from outside ends only its own term (its elector wins the
// key again), and closing the session frees every key at once.
func TestSessionElectors(t *testing.T) {
	srv := testserver.Redis(t, false)
	st, other := open(t, srv.URL(0)), open(t, srv.URL(0))
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	keys := make([]string, n)
	leading := make(chan int, 4*n)
	var wg sync.WaitGroup
	for i := range keys {
		keys[i] = randomKey()
		e, err := tenure.New(tenure.Config{Session: sess, Key: keys[i], Identity: "alpha"})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = e.Run(context.Background(), func(ctx context.Context) error {
				leading <- i
				<-ctx.Done()
				return nil
			})
		}()
	}
	awaitLeaders(t, leading, n)
	tamperOn(srv, redis.DefaultPrefix, 0).DeleteGrant(t, keys[0])
	if i := awaitLeaders(t, leading, 1); i[0] != 0 {
		t.Fatalf("after key 0 was deleted, elector %d led again", i[0])
	}
	if err := sess.Close(ctxFor(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, k := range keys {
		if r, err := other.Get(ctxFor(t), k); err != nil || r.Held() {
			t.Fatalf("Get(%q) after the session closed: %+v, %v", k, r, err)
		}
	}
}

// awaitLeaders returns the next n electors that began to lead.
func awaitLeaders(t *testing.T, leading <-chan int, n int) []int {
	t.Helper()
	var got []int
	timeout := time.After(20 * time.Second)
	for len(got) < n {
		select {
		case i := <-leading:
			got = append(got, i)
		case <-timeout:
			t.Fatalf("%d of %d electors led", len(got), n)
		}
	}
	return got
}

// An Acquire that fails without knowing whether its grant was made (here
// its deadline passes while the server is busy, and the grant is made
// afterwards) would leave a grant no elector knows of, held as long
// as the session lives; the next keep-alive releases it.
func TestSessionReleasesUnknownGrant(t *testing.T) {
	srv := testserver.Redis(t, false)
	st, other := open(t, srv.URL(0)), open(t, srv.URL(0))
	ss := storetest.OpenSession(t, st, 20*time.Second)
	storetest.AcquireIn(t, ss, randomKey(), "alpha", "") // the scripts are loaded, the checks done
	key := randomKey()
	// A script that keeps the server busy: the Acquire's request waits in
	// the socket, and runs after its caller gave up.
	busy := make(chan error, 1)
	go func() {
		busy <- client(t, srv).Eval(ctxFor(t), `
local function ms() local t = redis.call('TIME') return t[1] * 1000 + math.floor(t[2] / 1000) end
local start = ms()
while ms() - start < 1000 do end
return 1`, nil).Err()
	}()
	awaitBusy(t, srv)
	ctx, cancel := context.WithTimeout(ctxFor(t), 100*time.Millisecond)
	_, err := ss.Acquire(ctx, key, "alpha", "")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while the server is busy: got %v, want the deadline", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r, err := other.Get(ctxFor(t), key)
		if err != nil {
			t.Fatal(err)
		}
		if r.Held() {
			break // the grant nobody was told of
		}
		if time.Now().After(deadline) {
			t.Fatal("the held-back Acquire never made its grant")
		}
		time.Sleep(20 * time.Millisecond) // waiting for the busy script to end
	}
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
	if gone, err := ss.KeepAlive(ctxFor(t)); err != nil || len(gone) != 0 {
		t.Fatalf("KeepAlive: %+v, %v", gone, err)
	}
	if r, err := other.Get(ctxFor(t), key); err != nil || r.Held() {
		t.Fatalf("Get after the keep-alive: %+v, %v; want the unknown grant released", r, err)
	}
	if _, err := ss.Acquire(ctxFor(t), key, "alpha", ""); err != nil {
		t.Fatalf("Acquire again: %v", err)
	}
}

// A batch on a server that lost its script cache (a restart, SCRIPT
// FLUSH) loads the script once and answers every request.
func TestSessionBatchAfterScriptFlush(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	ss := storetest.OpenSession(t, st, 20*time.Second)
	storetest.AcquireIn(t, ss, randomKey(), "alpha", "") // the script is cached
	if err := client(t, srv).ScriptFlush(ctxFor(t)).Err(); err != nil {
		t.Fatal(err)
	}
	reqs := []tenure.AcquireRequest{{Key: randomKey(), Identity: "alpha"}, {Key: randomKey(), Identity: "alpha"}}
	for i, r := range ss.(tenure.BatchAcquirer).AcquireBatch(ctxFor(t), reqs) {
		if r.Err != nil || r.Lease.Key != reqs[i].Key {
			t.Fatalf("batch result %d after SCRIPT FLUSH: %+v, %v", i, r.Lease, r.Err)
		}
		wantHeldBy(t, st, r.Lease)
	}
}

// awaitBusy returns once the server has stopped answering: a PING from a
// client of its own gets no answer within 50 ms, as while a script runs.
func awaitBusy(t *testing.T, srv *testserver.RedisServer) {
	t.Helper()
	opt, err := goredis.ParseURL(srv.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true // else a PING waits out ReadTimeout, not its context
	c := goredis.NewClient(opt)
	defer c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(ctxFor(t), 50*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server still answers PING (%v): the busy script never started", err)
		}
	}
}
