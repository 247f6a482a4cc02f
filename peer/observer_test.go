package peer_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/internal/peertest"
	"github.com/tenurehq/tenure/peer/tcp"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/storetest"
)

// observerURL is the URL of an observer of g: g's member URL without id or
// state-dir, with the given secret file.
func (g *tcpGroup) observerURL(secretFile string) string {
	return fmt.Sprintf("peer://?peers=%s&algorithm=%s&secret-file=%s&heartbeat=%s&timeout=%s",
		g.group, g.alg, secretFile, tcpHeartbeat, tcpTimeout)
}

func openObserver(t testing.TB, raw string) tenure.Store {
	t.Helper()
	st := storetest.OpenClosing(t, tenure.Open, raw)
	if _, member := st.(*peer.Node); member {
		t.Fatal("a peer URL without id opened a member's node, want an observer")
	}
	return st
}

// TestObserverTCP: for each algorithm, an observer of a 3-member group on
// loopback reports the coordinator and epoch the members agree on, and its
// watch delivers the next coordinator after the first is killed.
func TestObserverTCP(t *testing.T) {
	for _, alg := range []string{"bully", "ring", "lowest"} {
		t.Run(alg, func(t *testing.T) {
			g := startTCPGroup(t, alg, 3)
			want := map[string][2]uint64{"bully": {3, 2}, "lowest": {1, 2}, "ring": {3, 2}}[alg]
			leader, epoch := g.awaitLeader(want[0], 5*time.Second)
			o := openObserver(t, g.observerURL(g.secret))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := o.Get(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if r.Key != "job" || r.Holder != strconv.FormatUint(leader, 10) || r.Term != epoch ||
				r.TTL != tcpTimeout || r.Remaining <= 0 || r.Remaining > r.TTL {
				t.Fatalf("observer Get = %+v; want member %d at epoch %d, ttl %s", r, leader, epoch, tcpTimeout)
			}
			w := peertest.WatchFrom(t, ctx, o, "job", r)
			g.stop(leader)
			got := peertest.NextHolder(t, w, strconv.FormatUint(want[1], 10), epoch, 10*time.Second)
			next, e2 := g.awaitLeader(want[1], 5*time.Second)
			if got.Holder != strconv.FormatUint(next, 10) || got.Term != e2 {
				t.Fatalf("the watch reported %s@%d; the members agree on %d@%d", got.Holder, got.Term, next, e2)
			}
			// The observer was never a member: nobody follows it, and each
			// live member answered it.
			for id, n := range g.nodes {
				if n == nil {
					continue
				}
				if s := n.Status(); s.Leader != next {
					t.Fatalf("member %d follows %d", id, s.Leader)
				}
				if st := n.Transport().(*tcp.Transport).Stats(); st.Queries == 0 {
					t.Fatalf("member %d answered no status query: %+v", id, st)
				}
			}
		})
	}
}

// TestObserverWrongSecret: an observer with another secret gets an error
// naming every member and learns nothing; the members count its frames as
// failing authentication.
func TestObserverWrongSecret(t *testing.T) {
	g := startTCPGroup(t, "bully", 3)
	g.awaitLeader(3, 5*time.Second)
	o := openObserver(t, g.observerURL(writeSecret(t, "a-wrong-secret-that-is-long-enough-to-load")))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := o.Get(ctx, "job")
	if err == nil || !errors.Is(err, transport.ErrUnreachable) {
		t.Fatalf("Get with the wrong secret = %+v, %v; want an error", r, err)
	}
	t.Logf("Get with the wrong secret: %v", err)
	if r != (tenure.Record{}) {
		t.Fatalf("Get with the wrong secret returned %+v", r)
	}
	for id := uint64(1); id <= 3; id++ {
		if !strings.Contains(err.Error(), fmt.Sprintf("member %d at %s", id, g.group.Addr(id))) {
			t.Fatalf("the error does not name member %d: %v", id, err)
		}
	}
	if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("the error shows a secret: %v", err)
	}
	if _, err := o.Watch(ctx, "job"); err == nil {
		t.Fatal("Watch with the wrong secret succeeded")
	}
	for id, n := range g.nodes {
		if st := n.Transport().(*tcp.Transport).Stats(); st.BadMAC == 0 || st.Queries != 0 {
			t.Fatalf("member %d: %+v; want the observer's frames failing authentication, none answered", id, st)
		}
	}
}

// TestObserverUnreachable: with no member running, Get fails within its
// context and names the members.
func TestObserverUnreachable(t *testing.T) {
	g := newTCPGroup(t, "ring", 3)
	o := openObserver(t, g.observerURL(g.secret))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := o.Get(ctx, "job")
	if !errors.Is(err, transport.ErrUnreachable) || !strings.Contains(err.Error(), "member 2 at "+g.group.Addr(2)) {
		t.Fatalf("Get of a group that is down = %v", err)
	}
}

// TestObserverCannotCampaign: Acquire, Renew and Release refuse with
// ErrInvalid; after Close every call returns ErrClosed.
func TestObserverCannotCampaign(t *testing.T) {
	g := newTCPGroup(t, "lowest", 3)
	o := openObserver(t, g.observerURL(g.secret))
	ctx := context.Background()
	if _, err := o.Acquire(ctx, "job", "1", time.Second); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "add id=N") {
		t.Fatalf("Acquire = %v, want ErrInvalid saying to add id=N", err)
	}
	l := tenure.Lease{Key: "job", Identity: "1", Term: 1, TTL: time.Second}
	if err := o.Renew(ctx, l); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Renew = %v, want ErrInvalid", err)
	}
	if err := o.Release(ctx, l); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Release = %v, want ErrInvalid", err)
	}
	if _, err := o.Get(ctx, "bad key\n"); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Get of a bad key = %v, want ErrInvalid", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Get(ctx, "job"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
	if _, err := o.Watch(ctx, "job"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Watch after Close = %v, want ErrClosed", err)
	}
	if _, err := o.Acquire(ctx, "job", "1", time.Second); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Acquire after Close = %v, want ErrClosed", err)
	}
	if err := o.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
