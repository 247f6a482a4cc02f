package peer_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/internal/simtest"
)

// grantedWithin polls n.Acquire every millisecond of virtual time until it
// grants, and returns how long that took, failing t after limit or on an
// error other than ErrHandover.
func grantedWithin(t *testing.T, n *peer.Node, limit time.Duration) (tenure.Lease, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		l, err := n.Acquire(context.Background(), "job", n.Identity(), time.Second)
		if err == nil {
			return l, time.Since(start)
		}
		if !errors.Is(err, peer.ErrHandover) {
			t.Fatalf("member %s Acquire = %v, want ErrHandover then a grant", n.Identity(), err)
		}
		if time.Since(start) > limit {
			t.Fatalf("member %s did not grant within %s", n.Identity(), limit)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHandoverWaitsForTheDeposedLease: bully member 3 recovers and takes
// over from 2, whose lease (TTL 1s) is outstanding. 3 must not grant while
// 2's lease may be in use: the deposed node pushes its loss at once
// (Renew fails, its watch names 3), and 3 grants about one message after 2's
// lease is released — or, when nobody releases it, once its TTL ran out
// since its last renewal by 2's clock.
func TestHandoverWaitsForTheDeposedLease(t *testing.T) {
	for _, release := range []bool{true, false} {
		name := "released"
		if !release {
			name = "ran out"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				c := simtest.New(simtest.Options{Algorithm: "bully", Size: 3, Seed: 7})
				defer c.Close()
				for _, id := range []uint64{1, 2} {
					if err := c.Start(id); err != nil {
						t.Fatal(err)
					}
				}
				if l, _, err := c.AwaitAgreement(time.Minute); err != nil || l != 2 {
					t.Fatalf("first coordinator %d, %v; want 2", l, err)
				}
				n2 := c.Nodes[2]
				l2, _ := grantedWithin(t, n2, 2*time.Second)
				w, err := n2.Watch(ctx, "job")
				if err != nil {
					t.Fatal(err)
				}
				<-w // the current record
				if err := n2.Renew(ctx, l2); err != nil {
					t.Fatal(err)
				}
				renewed := time.Now()
				if err := c.Start(3); err != nil {
					t.Fatal(err)
				}
				// The deposed node pushes its loss: its watch names the new
				// coordinator under a higher epoch, and Renew fails.
				r := <-w
				if why := tenure.Superseded(l2, r); why == "" {
					t.Fatalf("2's watch delivered %+v, which does not supersede term %d", r, l2.Term)
				}
				if err := n2.Renew(ctx, l2); !errors.Is(err, tenure.ErrLost) {
					t.Fatalf("Renew of the deposed lease = %v, want ErrLost", err)
				}
				n3 := c.Nodes[3]
				if !n3.Status().Coordinator {
					t.Fatalf("member 3 is not coordinator after 2 saw it: %+v", n3.Status())
				}
				if _, err := n3.Acquire(ctx, "job", "3", time.Second); !errors.Is(err, peer.ErrHandover) {
					t.Fatalf("member 3 Acquire while 2's lease is outstanding = %v, want ErrHandover", err)
				}
				time.Sleep(150 * time.Millisecond)
				if _, err := n3.Acquire(ctx, "job", "3", time.Second); !errors.Is(err, peer.ErrHandover) {
					t.Fatalf("member 3 Acquire 150ms after the takeover = %v, want ErrHandover", err)
				}
				if release {
					if err := n2.Release(ctx, l2); !errors.Is(err, tenure.ErrLost) {
						t.Fatalf("Release of the deposed lease = %v, want ErrLost", err)
					}
				}
				l3, took := grantedWithin(t, n3, 2*time.Second)
				if l3.Term <= l2.Term {
					t.Fatalf("member 3 granted term %d after term %d", l3.Term, l2.Term)
				}
				if release && took > 10*time.Millisecond {
					t.Fatalf("member 3 granted %s after 2 released, want about one message (memnet: <1ms)", took)
				}
				if since := time.Since(renewed); !release && (since < time.Second || since > time.Second+2*peer.DefaultHeartbeat) {
					t.Fatalf("member 3 granted %s after 2's last renewal, want the TTL (1s) plus at most two heartbeats", since)
				}
			})
		})
	}
}

// TestHandoverAfterACrash: when the coordinator crashes, the new one grants
// once it has been silent for Timeout + Heartbeat since the election: it is
// taken to have crashed (the synchrony assumption), so its task ended.
func TestHandoverAfterACrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := simtest.Start(t, simtest.Options{Algorithm: "bully", Size: 3, Seed: 3})
		if l, _, err := c.AwaitAgreement(time.Minute); err != nil || l != 3 {
			t.Fatalf("first coordinator %d, %v; want 3", l, err)
		}
		grantedWithin(t, c.Nodes[3], 2*time.Second)
		c.Crash(3)
		n2 := c.Nodes[2]
		for !n2.Status().Coordinator {
			time.Sleep(time.Millisecond)
		}
		_, took := grantedWithin(t, n2, 5*time.Second)
		quiet := peer.DefaultTimeoutFactor*peer.DefaultHeartbeat + peer.DefaultHeartbeat
		if took < quiet-peer.DefaultHeartbeat || took > quiet+peer.DefaultHeartbeat {
			t.Fatalf("member 2 granted %s after its election, want about Timeout + Heartbeat (%s)", took, quiet)
		}
	})
}

// TestCloseEndsTheCoordinatorsWatch: a coordinator's node that closes
// tells its watchers that its grant is gone before the watch ends, so an
// elector leading through it cancels its task at once.
func TestCloseEndsTheCoordinatorsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := simtest.Start(t, simtest.Options{Algorithm: "bully", Size: 2, Seed: 5})
		if l, _, err := c.AwaitAgreement(time.Minute); err != nil || l != 2 {
			t.Fatalf("coordinator %d, %v; want 2", l, err)
		}
		n2 := c.Nodes[2]
		l2, _ := grantedWithin(t, n2, 2*time.Second)
		w, err := n2.Watch(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if r := <-w; r.Holder != "2" {
			t.Fatalf("first record %+v, want holder 2", r)
		}
		c.Crash(2)
		var lost bool
		for r := range w {
			lost = lost || tenure.Superseded(l2, r) != ""
		}
		if !lost {
			t.Fatal("the watch of a closed coordinator ended without a record superseding its lease")
		}
	})
}
