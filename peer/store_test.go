package peer_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/bully"
	"github.com/tenurehq/tenure/peer/internal/simtest"
	"github.com/tenurehq/tenure/peer/transport"
)

// awaitRecord reads w until a record with holder arrives.
func awaitRecord(t *testing.T, w <-chan tenure.Record, holder string) tenure.Record {
	t.Helper()
	for r := range w {
		if r.Holder == holder {
			return r
		}
	}
	t.Fatalf("watch closed before holder %q", holder)
	return tenure.Record{}
}

// acquireGranted acquires on n as soon as its handover completes: n's
// watch delivers the record again then.
func acquireGranted(t *testing.T, n *peer.Node) tenure.Lease {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := n.Watch(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	for range w {
		l, err := n.Acquire(ctx, "job", n.Identity(), time.Second)
		if err == nil {
			return l
		}
		if !errors.Is(err, peer.ErrHandover) {
			t.Fatalf("member %s Acquire = %v, want a grant after the handover", n.Identity(), err)
		}
	}
	t.Fatal("watch closed before the grant")
	return tenure.Lease{}
}

// TestNodeStore checks the Store contract of a node over memnet, in
// virtual time.
func TestNodeStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := simtest.Start(t, simtest.Options{Algorithm: "bully", Size: 3, Seed: 1})
		watch, l3, epoch := checkFirstGrant(t, c)
		checkReleaseAndTakeover(t, c, watch, l3, epoch)
		checkClose(t, c, watch)
	})
}

// checkFirstGrant: before the first election Acquire fails transiently;
// then 3 is coordinator and grants, the others refuse with its record. It
// returns member 1's watch, 3's lease and its epoch.
func checkFirstGrant(t *testing.T, c *simtest.Cluster) (<-chan tenure.Record, tenure.Lease, uint64) {
	ctx := context.Background()
	n1, n2, n3 := c.Nodes[1], c.Nodes[2], c.Nodes[3]

	// Before the first election: transient ErrElecting, not ErrHeld.
	_, err := n3.Acquire(ctx, "job", "3", time.Second)
	if !errors.Is(err, peer.ErrElecting) || errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire during the election = %v, want ErrElecting", err)
	}
	if _, err := n3.Acquire(ctx, "job", "1", time.Second); !errors.Is(err, tenure.ErrInvalid) ||
		!strings.Contains(err.Error(), `"1"`) || !strings.Contains(err.Error(), `"3"`) {
		t.Fatalf("Acquire for another identity = %v, want ErrInvalid naming both", err)
	}
	watch, err := n1.Watch(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.AwaitAgreement(time.Minute); err != nil {
		t.Fatal(err)
	}
	r := awaitRecord(t, watch, "3")
	epoch := n3.Status().LeaderEpoch
	if r.Term != epoch {
		t.Fatalf("watch says term %d, coordinator epoch is %d", r.Term, epoch)
	}

	var held *tenure.HeldError
	if _, err := n1.Acquire(ctx, "job", "1", time.Second); !errors.As(err, &held) || held.Record.Holder != "3" || held.Record.Term != epoch {
		t.Fatalf("follower Acquire = %v, want HeldError by 3 at %d", err, epoch)
	}
	l3 := acquireGranted(t, n3)
	if l3.Term != epoch {
		t.Fatalf("coordinator Acquire = %+v; want term %d", l3, epoch)
	}
	if _, err := n3.Acquire(ctx, "job", "3", time.Second); !errors.As(err, &held) || held.Record.Holder != "3" {
		t.Fatalf("second Acquire = %v, want HeldError by itself", err)
	}
	if rec, err := n2.Get(ctx, "job"); err != nil || rec.Holder != "3" || rec.Term != epoch {
		t.Fatalf("Get = %+v, %v", rec, err)
	}
	if _, err := n2.Get(ctx, "other"); !errors.Is(err, tenure.ErrInvalid) {
		t.Fatalf("Get of a second key = %v, want ErrInvalid", err)
	}
	if err := n3.Renew(ctx, l3); err != nil {
		t.Fatal(err)
	}

	return watch, l3, epoch
}

// checkReleaseAndTakeover: member 3 resigns and abstains, 2 is elected,
// and 3 (highest, preemptive) takes over when its abstention ends.
func checkReleaseAndTakeover(t *testing.T, c *simtest.Cluster, watch <-chan tenure.Record, l3 tenure.Lease, epoch uint64) {
	ctx := context.Background()
	n2, n3 := c.Nodes[2], c.Nodes[3]
	// Release: member 3 resigns and abstains; 2 is elected.
	if err := n3.Release(ctx, l3); err != nil {
		t.Fatal(err)
	}
	if err := n3.Renew(ctx, l3); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew after Release = %v, want ErrLost", err)
	}
	if err := n3.Release(ctx, l3); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("second Release = %v, want ErrLost", err)
	}
	r2 := awaitRecord(t, watch, "2")
	if r2.Term <= epoch {
		t.Fatalf("member 2 leads at term %d, not above %d", r2.Term, epoch)
	}
	l2 := acquireGranted(t, n2)
	if l2.Term != r2.Term {
		t.Fatalf("member 2 Acquire = %+v, want term %d", l2, r2.Term)
	}
	// When the abstention ends, 3 (highest, preemptive) takes over: 2's
	// lease is lost and changes nothing.
	w2, err := n2.Watch(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	r3 := awaitRecord(t, w2, "3")
	if r3.Term <= l2.Term {
		t.Fatalf("member 3 is back at term %d, not above %d", r3.Term, l2.Term)
	}
	if err := n2.Renew(ctx, l2); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew after a takeover = %v, want ErrLost", err)
	}
	if err := n2.Release(ctx, l2); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Release after a takeover = %v, want ErrLost", err)
	}

}

// checkClose: a closed node answers ErrClosed, and its watch ends.
func checkClose(t *testing.T, c *simtest.Cluster, watch <-chan tenure.Record) {
	ctx := context.Background()
	n1, n3 := c.Nodes[1], c.Nodes[3]
	// Close: ErrClosed, and the watch ends.
	c.Crash(1)
	for range watch {
	}
	if _, err := n1.Get(ctx, "job"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Get after Close = %v", err)
	}
	if _, err := n1.Acquire(ctx, "job", "1", time.Second); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Acquire after Close = %v", err)
	}
	l3b := acquireGranted(t, n3)
	c.Crash(3)
	if err := n3.Renew(ctx, l3b); !errors.Is(err, tenure.ErrClosed) || !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew after Close = %v, want ErrClosed and ErrLost", err)
	}
}

func TestCorruptEpochFileStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "peer-1.epoch"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	g, _ := transport.ParseMembers("1=127.0.0.1:1,2=127.0.0.1:2")
	_, err := peer.NewNode(peer.Config{ID: 1, Group: g, Algorithm: "bully", StateDir: dir, Secret: testKey(t),
		Logger: slog.New(slog.DiscardHandler)}, bully.New())
	if !errors.Is(err, peer.ErrCorrupt) {
		t.Fatalf("NewNode with a corrupt epoch file = %v, want ErrCorrupt", err)
	}
}
