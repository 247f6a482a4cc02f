package etcd

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/tenurehq/tenure/storetest"
)

// TestTTLSecondsNoOverflow: a huge TTL stays huge. Before, ttl+1s-1
// overflowed and a lease of about 292 years became a one-second lease.
func TestTTLSecondsNoOverflow(t *testing.T) {
	for ttl, want := range map[time.Duration]int64{
		time.Nanosecond: 1, time.Second: 1, 1500 * time.Millisecond: 2, 2 * time.Second: 2,
		math.MaxInt64: math.MaxInt64/int64(time.Second) + 1,
	} {
		if got := ttlSeconds(ttl); got != want {
			t.Errorf("ttlSeconds(%s) = %d, want %d", ttl, got, want)
		}
	}
}

// FuzzOpenURL: Open never panics, and with a secret planted in any secret
// position its error never contains it. The context is cancelled, so
// nothing dials: Open parses, then gives up.
func FuzzOpenURL(f *testing.F) {
	f.Add("etcd://h/p?x=1", uint8(0), "etcd", "root", "h", "p", "")
	f.Add("etcd://h:1,:2,h:/p", uint8(11), "etcd", "", "h:1,h", "", "")
	storetest.FuzzOpen(f, "etcd://root:pw@127.0.0.1:2379,127.0.0.1:2380/prefix", []string{"etcd", ""}, storetest.OpenOffline(Open, nil))
}

// A request past its deadline fails with context.DeadlineExceeded even
// before the context's timer fired, as on a busy machine, whatever the
// client returned meanwhile.
func TestPastDeadlineIsDeadlineExceeded(t *testing.T) {
	s := &Store{}
	unavailable := errors.New("rpc error: code = Unavailable desc = connection error")
	storetest.PastDeadline(t, s.usable, func(ctx context.Context, err error) error { return s.fail(ctx, "get", "job", err) }, unavailable)
}
