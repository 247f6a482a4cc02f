package promtenure_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/httpview"
	"github.com/tenurehq/tenure/promtenure"
	"github.com/tenurehq/tenure/store/memory"
)

// A candidate exports its metrics at httpview's /metrics; the leader task
// scrapes them.
func Example() {
	cfg := tenure.Config{Store: memory.New(nil), Key: "reports", Identity: "worker-1", TTL: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)}
	metrics := promtenure.New(cfg.Key)
	cfg.OnEvent = metrics.OnEvent(cfg.OnEvent)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)

	view, err := httpview.New(httpview.Options{Key: cfg.Key, Store: cfg.Store,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})})
	if err != nil {
		panic(err)
	}
	elector, err := tenure.New(cfg)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(view)
	defer srv.Close()

	err = elector.Do(context.Background(), func(ctx context.Context) error {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			l := lines.Text()
			if strings.HasPrefix(l, "leader_election_master_status") || strings.HasPrefix(l, "tenure_is_leader") ||
				strings.HasPrefix(l, "tenure_term") || strings.HasPrefix(l, "tenure_acquire_attempts_total") {
				fmt.Println(l)
			}
		}
		return lines.Err()
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// leader_election_master_status{name="reports"} 1
	// tenure_acquire_attempts_total{key="reports"} 1
	// tenure_is_leader{key="reports"} 1
	// tenure_term{key="reports"} 1
}

// A process leading many keys through one Session exports the session's
// health in a few series, whatever the number of keys: each keep-alive
// feeds the collector through SessionConfig.OnKeepAlive.
func ExampleNewSession() {
	metrics := promtenure.NewSession("partitions")
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics)
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: memory.New(nil), TTL: 3 * time.Second,
		OnKeepAlive: metrics.OnKeepAlive(nil), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	defer sess.Close(ctx) // after every Resign below
	for _, p := range []string{"p0", "p1", "p2"} {
		l, err := sess.Campaign(ctx, p, "worker-1", "")
		if err != nil {
			panic(err)
		}
		defer l.Resign(ctx)
	}
	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		fmt.Println(f.GetName())
	}
	// Output:
	// tenure_session_ends_total
	// tenure_session_grants
	// tenure_session_grants_gone_total
	// tenure_session_keepalive_failures_total
	// tenure_session_keepalive_latency_seconds
}
