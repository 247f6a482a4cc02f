package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenurehq/tenure/shard"
)

// shardHTTPUsage is the usage of tenure shard's --http.
const shardHTTPUsage = "serve this member's view on `ADDR` (such as :8080): GET / (JSON: the live members, the keys it owns and leads), /healthz, /readyz (200 once it is live in its own view), /metrics"

// shardView is tenure shard's --http: the member's [shard.Status] as JSON
// and Prometheus metrics, behind the limits of tenure run's view (see
// viewMaxConns, loopbackHosts). It reads the sharder's status, which never
// blocks on the store, at each request; the metrics are per member, never
// per key, so a scrape costs the same with 4096 keys as with one.
type shardView struct {
	sh    *shard.Sharder
	group string
	ln    net.Listener
	srv   *http.Server
	// kernelPort: --http asked for port 0, and the kernel chose one.
	kernelPort bool
}

// listenShardView listens on addr, so that an address in use fails the
// command before the member goes live. Call serve to start answering.
func listenShardView(addr, group string, sh *shard.Sharder) (*shardView, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %q: %w", addr, err)
	}
	v := &shardView{sh: sh, group: group}
	reg := prometheus.NewRegistry()
	reg.MustRegister(shardCollector{v}, collectors.NewGoCollector(), newProcCollector())
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.status)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", v.ready)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{DisableCompression: true}))
	v.srv = &http.Server{Handler: loopbackHosts(mux), ReadHeaderTimeout: viewHeaderTimeout, IdleTimeout: viewIdleTimeout,
		MaxHeaderBytes: viewMaxHeaderBytes}
	limited := newConnLimiter(ln, viewMaxConns)
	limited.install(v.srv)
	v.ln = limited
	_, port, _ := net.SplitHostPort(addr)
	v.kernelPort = port == "0"
	return v, nil
}

// shardStatus is the JSON of GET /.
type shardStatus struct {
	Group    string   `json:"group"`
	ID       string   `json:"id"`
	Live     []string `json:"live"`
	Owns     []string `json:"owns"`
	Leading  []string `json:"leading"`
	Changes  uint64   `json:"changes"`
	Handoffs uint64   `json:"handoffs"`
}

func (v *shardView) snapshot() shardStatus {
	st := v.sh.Status()
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	return shardStatus{Group: v.group, ID: st.Identity, Live: nonNil(st.Live), Owns: nonNil(st.Owns),
		Leading: nonNil(st.Leading), Changes: st.Changes, Handoffs: st.Handoffs}
}

func (v *shardView) status(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v.snapshot())
}

// ready answers 200 while this member is live in its own view (its
// liveness lease is seen granted to it), else 503.
func (v *shardView) ready(w http.ResponseWriter, _ *http.Request) {
	st := v.snapshot()
	for _, m := range st.Live {
		if m == st.ID {
			_, _ = w.Write([]byte("live\n"))
			return
		}
	}
	http.Error(w, "not live in its own view", http.StatusServiceUnavailable)
}

// serve logs the address it serves on and answers requests until ctx is
// done; then it shuts the server down (see serveView). It returns at once.
func (v *shardView) serve(ctx context.Context, logger *slog.Logger) {
	serveView(ctx, logger, v.srv, v.ln, v.kernelPort, "group", v.group)
}

// shardCollector exports a member's status: a fixed set of series,
// labelled by group only, whatever the number of keys.
type shardCollector struct{ v *shardView }

var (
	shardLiveDesc = prometheus.NewDesc("tenure_shard_live_members",
		"Members this member sees live.", []string{"group"}, nil)
	shardSelfLiveDesc = prometheus.NewDesc("tenure_shard_member_live",
		"1 if this member is live in its own view, else 0.", []string{"group"}, nil)
	shardOwnsDesc = prometheus.NewDesc("tenure_shard_owned_keys",
		"Keys this member owns among the live members.", []string{"group"}, nil)
	shardLeadingDesc = prometheus.NewDesc("tenure_shard_leading_keys",
		"Keys whose command this member runs now.", []string{"group"}, nil)
	shardChangesDesc = prometheus.NewDesc("tenure_shard_membership_changes_total",
		"Changes of the live set this member saw after its first view.", []string{"group"}, nil)
	shardHandoffsDesc = prometheus.NewDesc("tenure_shard_handoffs_total",
		"Keys this member stopped leading because the live set changed or a fallback term ended.", []string{"group"}, nil)
)

func (c shardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{shardLiveDesc, shardSelfLiveDesc, shardOwnsDesc, shardLeadingDesc, shardChangesDesc, shardHandoffsDesc} {
		ch <- d
	}
}

func (c shardCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.v.snapshot()
	self := 0.0
	for _, m := range st.Live {
		if m == st.ID {
			self = 1
		}
	}
	g := c.v.group
	ch <- prometheus.MustNewConstMetric(shardLiveDesc, prometheus.GaugeValue, float64(len(st.Live)), g)
	ch <- prometheus.MustNewConstMetric(shardSelfLiveDesc, prometheus.GaugeValue, self, g)
	ch <- prometheus.MustNewConstMetric(shardOwnsDesc, prometheus.GaugeValue, float64(len(st.Owns)), g)
	ch <- prometheus.MustNewConstMetric(shardLeadingDesc, prometheus.GaugeValue, float64(len(st.Leading)), g)
	ch <- prometheus.MustNewConstMetric(shardChangesDesc, prometheus.CounterValue, float64(st.Changes), g)
	ch <- prometheus.MustNewConstMetric(shardHandoffsDesc, prometheus.CounterValue, float64(st.Handoffs), g)
}
