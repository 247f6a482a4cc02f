package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver/etcdtest"
)

// TestFreshKeysCarryNoWait: electors on fresh keys, each watching its key
// while it acquires (as a campaign does), must get grants without a Wait.
// The handle's watch used to see the new grant before the Acquire read its
// reply, and the Acquire then took its own grant for a vanished earlier
// one and waited a whole TTL.
func TestFreshKeysCarryNoWait(t *testing.T) {
	srv := etcdtest.Start(t)
	for _, mode := range []string{"per key", "session"} {
		t.Run(mode, func(t *testing.T) {
			st := openOn(srv, "/fresh-"+mode)(t)
			defer st.Close()
			cfg := tenure.Config{Store: st, TTL: 10 * time.Second}
			if mode == "session" {
				s, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close(context.Background())
				cfg = tenure.Config{Session: s}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const n = 30
			waits := make(chan time.Duration, n)
			for i := range n {
				cfg.Key, cfg.Identity, cfg.Logger = fmt.Sprintf("k%d", i), "p1", slog.New(slog.DiscardHandler)
				e, err := tenure.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				go e.Run(ctx, func(ctx context.Context) error {
					l, _ := tenure.LeaseFrom(ctx)
					waits <- l.Wait
					<-ctx.Done()
					return nil
				})
			}
			for range n {
				select {
				case w := <-waits:
					if w != 0 {
						t.Errorf("a grant of a fresh key carried a Wait of %s", w)
					}
				case <-time.After(5 * time.Second): // a Wait would be 10 s
					t.Fatal("a fresh key was not led within 5s")
				}
			}
		})
	}
}

// A session asked again for a grant it made (a retry after a lost reply)
// gets it back, with its term: how the etcd store meets the rule that such
// a grant must not live on unknown (tenure.StoreSession.Acquire).
func TestSessionAcquireAgainReturnsTheGrant(t *testing.T) {
	srv := etcdtest.Start(t)
	st := openOn(srv, "/again")(t)
	defer st.Close()
	ss, err := st.(tenure.SessionStore).OpenSession(t.Context(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close(context.Background())
	l, err := ss.Acquire(t.Context(), "k", "alpha", "v")
	if err != nil {
		t.Fatal(err)
	}
	again, err := ss.Acquire(t.Context(), "k", "alpha", "v")
	if err != nil || again.Term != l.Term || again.Token != l.Token {
		t.Fatalf("Acquire again = %+v, %v; want the grant of term %d", again, err, l.Term)
	}
	if err := st.Renew(t.Context(), again); err != nil {
		t.Fatalf("the grant returned again does not renew: %v", err)
	}
	if _, err := ss.Acquire(t.Context(), "k", "beta", ""); !errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire by another identity in the session: %v, want ErrHeld", err)
	}
}
