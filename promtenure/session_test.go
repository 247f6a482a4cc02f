package promtenure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// TestSessionMetrics: a session leading three keys through Campaign
// exports its keep-alives' round trips and the grants they kept; then
// failures and ends are counted by kind.
func TestSessionMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewSession("partitions")
		reg := prometheus.NewRegistry()
		reg.MustRegister(m)
		has(t, "at the start", scrape(t, reg),
			`tenure_session_grants{session="partitions"} 0`,
			`tenure_session_keepalive_latency_seconds_count{session="partitions"} 0`,
			`tenure_session_ends_total{reason="lost",session="partitions"} 0`,
		)
		var passed []tenure.SessionKeepAlive
		sess, err := tenure.NewSession(tenure.SessionConfig{Store: memory.New(nil), TTL: 3 * time.Second,
			Logger:      slog.New(slog.DiscardHandler),
			OnKeepAlive: m.OnKeepAlive(func(k tenure.SessionKeepAlive) { passed = append(passed, k) })})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var held []*tenure.Leadership
		for i := range 3 {
			l, err := sess.Campaign(ctx, fmt.Sprintf("p%d", i), "a", "")
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		time.Sleep(3500 * time.Millisecond) // three keep-alives, one a second
		synctest.Wait()
		has(t, "leading three keys", scrape(t, reg),
			`tenure_session_grants{session="partitions"} 3`,
			`tenure_session_keepalive_latency_seconds_count{session="partitions"} 3`,
			`tenure_session_keepalive_failures_total{session="partitions"} 0`,
			`tenure_session_grants_gone_total{session="partitions"} 0`,
		)
		if len(passed) != 3 {
			t.Errorf("the next OnKeepAlive got %d keep-alives, want 3", len(passed))
		}
		for _, l := range held {
			l.Resign(ctx)
		}
		if err := sess.Close(ctx); err != nil {
			t.Fatal(err)
		}

		on := m.OnKeepAlive(nil)
		on(tenure.SessionKeepAlive{Err: errors.New("connection refused"), Grants: 3})
		on(tenure.SessionKeepAlive{Err: fmt.Errorf("%w: session expired", tenure.ErrLost), Gone: 0})
		on(tenure.SessionKeepAlive{Err: fmt.Errorf("%w (too late)", tenure.ErrRenewDeadline)})
		on(tenure.SessionKeepAlive{Took: time.Millisecond, Grants: 1, Gone: 2})
		has(t, "after failures", scrape(t, reg),
			`tenure_session_keepalive_failures_total{session="partitions"} 1`,
			`tenure_session_ends_total{reason="lost",session="partitions"} 1`,
			`tenure_session_ends_total{reason="renew_deadline",session="partitions"} 1`,
			`tenure_session_grants{session="partitions"} 1`,
			`tenure_session_grants_gone_total{session="partitions"} 2`,
			`tenure_session_keepalive_latency_seconds_count{session="partitions"} 4`,
		)
	})
}
