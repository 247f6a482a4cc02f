package zk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/zk"
	"github.com/tenurehq/tenure/storetest"
)

// TestDisconnectEndsLeadershipAtOnce stops the server under a holder: its
// session is disconnected, and Renew must report the loss (ErrLost) rather
// than claim the grant, the moment the client notices. Once the server is
// back, the old grant is gone for good and another candidate gets a higher
// term once ZooKeeper expired the old session.
func TestDisconnectEndsLeadershipAtOnce(t *testing.T) {
	srv := server(t)
	a := open(t, "zk://"+srv.Addr+"/disconnect")
	b := open(t, "zk://"+srv.Addr+"/disconnect")
	ctx := ctxT(t, 60*time.Second)
	l, err := a.Acquire(ctx, "k", "alpha", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	// The client sees the connection close at once (EOF); give it up to a
	// second, well under the TTL, polling Renew as an elector would.
	deadline := time.Now().Add(time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err = a.Renew(rctx, l)
		cancel()
		if errors.Is(err, tenure.ErrLost) {
			break
		}
		if err == nil {
			t.Fatal("Renew succeeded with the server down")
		}
		if time.Now().After(deadline) {
			t.Fatalf("Renew with the server down for 1s: %v, want ErrLost", err)
		}
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := a.Renew(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew after the server came back: %v, want ErrLost", err)
	}
	var l2 tenure.Lease
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		l2, err = b.Acquire(rctx, "k", "beta", 2*time.Second)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no takeover after the restart: %v", err)
		}
		var held *tenure.HeldError
		if errors.As(err, &held) {
			// The old session is alive until ZooKeeper expires it.
			time.Sleep(100 * time.Millisecond)
		}
	}
	if l2.Term <= l.Term {
		t.Fatalf("term went from %d to %d", l.Term, l2.Term)
	}
	if err := a.Release(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Release of the lost grant: %v, want ErrLost", err)
	}
}

// TestServerDownAndBack checks that calls against a stopped server fail
// within their context naming the server, and that the same handle works
// again by itself once it is back.
func TestServerDownAndBack(t *testing.T) {
	srv := server(t)
	st := open(t, "zk://"+srv.Addr+"/down")
	ctx := ctxT(t, 60*time.Second)
	if _, err := st.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	_, err := st.Acquire(short, "k", "alpha", time.Second)
	took := time.Since(began)
	// Either the context ran out, or the client saw the connection close
	// first (it does when the stop reaches it during the call), or, for a
	// request queued before the client noticed, failed to reconnect: all
	// are a prompt failure, which is what matters.
	if err == nil || (!errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "connection closed") &&
		!errors.Is(err, gozk.ErrNoServer)) {
		t.Fatalf("Acquire with the server down: %v, want context.DeadlineExceeded or a closed connection", err)
	}
	if !strings.Contains(err.Error(), srv.Addr) {
		t.Errorf("error %q does not name the server %s", err, srv.Addr)
	}
	if took > time.Second {
		t.Errorf("Acquire with a 300ms context took %s", took)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		l, err := st.Acquire(rctx, "k", "alpha", time.Second)
		cancel()
		if err == nil {
			if err := st.Release(ctx, l); err != nil {
				t.Fatalf("Release after recovery: %v", err)
			}
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the handle did not recover: %v", err)
		}
	}
}

// TestCredentialsNeverInErrors uses digest authentication: the store's
// nodes carry an ACL for its user, a store with a wrong password is
// refused, and no error quotes either password.
func TestCredentialsNeverInErrors(t *testing.T) {
	srv := server(t)
	const good, bad = "g00d-Secret-pw", "wr0ng-Secret-pw"
	ctx := ctxT(t, 30*time.Second)
	owner := open(t, fmt.Sprintf("zk://alice:%s@%s/auth", good, srv.Addr))
	storetest.HeldFailsHiding(t, owner, good, bad)

	intruder := open(t, fmt.Sprintf("zk://alice:%s@%s/auth", bad, srv.Addr))
	_, err := intruder.Acquire(ctx, "k", "mallory", time.Second)
	storetest.FailsHiding(t, "Acquire with a wrong password", err, good, bad)
	if !strings.Contains(err.Error(), "not authenticated") {
		t.Errorf("Acquire with a wrong password: %v, want ZooKeeper's NoAuth", err)
	}

	down := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	st := open(t, fmt.Sprintf("zk://alice:%s@%s/auth", good, down))
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = st.Get(short, "k")
	storetest.FailsHiding(t, "Get from a server that is down", err, good, bad)

	_, err = tenure.Open(ctx, fmt.Sprintf("zk://alice:%s@%s/auth?x=1", good, srv.Addr))
	storetest.FailsHiding(t, "Open with a bad URL", err, good, bad)
	_, err = zk.Open(ctx, fmt.Sprintf("zk://alice:%s@%s", good, "nohost"))
	storetest.FailsHiding(t, "Open with a bad host", err, good, bad)
}

// TestCrashedHolderExpiresOnServer cuts a holder's connection without
// closing its session, as a crash would: the holder's store gives the
// grant up at once, and ZooKeeper, judging by its own clock, frees the key
// after the session timeout (the TTL, rounded up to its tickTime buckets).
func TestCrashedHolderExpiresOnServer(t *testing.T) {
	srv := server(t)
	a := open(t, "zk://"+srv.Addr+"/crash")
	b := open(t, "zk://"+srv.Addr+"/crash")
	ctx := ctxT(t, 30*time.Second)
	const ttl = time.Second
	l, err := a.Acquire(ctx, "k", "alpha", ttl)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := b.Watch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.Holder != "alpha" {
		t.Fatalf("watch began with %+v", r)
	}
	crashed := time.Now()
	zk.Crash(a, l)
	select {
	case r := <-ch:
		if r.Held() {
			t.Fatalf("watch delivered %+v, want the key free", r)
		}
	case <-time.After(ttl + 2*testserver.ZKTickTime + time.Second):
		t.Fatalf("the key was not freed %s after the crash (TTL %s)", time.Since(crashed), ttl)
	}
	freed := time.Since(crashed)
	if freed < ttl*2/3 {
		t.Fatalf("the key was freed %s after the crash, before ZooKeeper could expire a %s session", freed, ttl)
	}
	t.Logf("key freed %s after the crash (TTL %s, tickTime %s)", freed, ttl, testserver.ZKTickTime)
	if err := a.Renew(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew after the crash: %v, want ErrLost", err)
	}
	l2, err := b.Acquire(ctx, "k", "beta", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Term <= l.Term {
		t.Fatalf("term went from %d to %d", l.Term, l2.Term)
	}
}
