package promtenure

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/memory"
)

// TestAlertFiresOnARealPrometheus: a Prometheus server scraping two
// candidates of one key, with alerts.yml loaded (its `for` cut to 2 s),
// fires no alert while one of them leads, and TenureNotOneLeader once both
// are gone, when their targets are down and no series of the key is left:
// what promtool's synthetic "gone" scenario stands for, with real
// scrapes, staleness and rule evaluation.
func TestAlertFiresOnARealPrometheus(t *testing.T) {
	bin := testserver.LookPath(t, "prometheus", "apt-get install prometheus")
	store := memory.New(nil)
	var targets []string
	var servers []*httptest.Server
	for _, id := range []string{"a", "b"} {
		c := newCandidate(t, store.Handle(), id)
		srv := httptest.NewServer(promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{}))
		t.Cleanup(srv.Close)
		servers = append(servers, srv)
		targets = append(targets, fmt.Sprintf("%q", strings.TrimPrefix(srv.URL, "http://")))
	}
	api := startPrometheus(t, bin, targets)

	// Healthy: both series scraped a few times, one leader, no alert.
	waitQuery(t, api, `count_over_time(leader_election_master_status{name="job"}[10s]) >= 4`, 2)
	waitQuery(t, api, `sum(leader_election_master_status{name="job"}) == 1`, 1)
	if got := query(t, api, `ALERTS{name="job"}`); len(got) != 0 {
		t.Fatalf("alerts while one candidate leads: %v", got)
	}

	for _, s := range servers { // every candidate of the key gone
		s.Close()
	}
	waitQuery(t, api, `ALERTS{alertname="TenureNotOneLeader",name="job",alertstate="firing"}`, 1)
	if got := query(t, api, `sum(leader_election_master_status{name="job"}) != 1`); len(got) != 0 {
		t.Fatalf("with every target down, the plain sum rule answers %v; its silence is what the second arm is for", got)
	}
}

// startPrometheus runs Prometheus on a free loopback port, scraping targets
// every second with alerts.yml's rules (for: 2s), stopped by t.Cleanup,
// and returns its base URL once it is ready.
func startPrometheus(t *testing.T, bin string, targets []string) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	fast := strings.ReplaceAll(string(rules), "for: 1m", "for: 2s")
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), []byte(fast), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [rules.yml]\n"+
		"scrape_configs:\n  - job_name: tenure\n    static_configs: [{targets: [%s]}]\n", strings.Join(targets, ", "))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	out := &syncbuf.Buffer{}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	api := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		if resp, err := http.Get(api + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return api
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("prometheus not ready within 30 s:\n%s", out.String())
		case <-time.After(100 * time.Millisecond): // polling a server that has no readiness event
		}
	}
}

// query returns the instant vector Prometheus at api answers q with.
func query(t *testing.T, api, q string) []json.RawMessage {
	t.Helper()
	resp, err := http.Get(api + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct{ Result []json.RawMessage }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s %s", q, err, r.Status, r.Error)
	}
	return r.Data.Result
}

// waitQuery waits up to 30 s, polling every 250 ms (Prometheus scrapes and
// evaluates every second), for q to answer n series.
func waitQuery(t *testing.T, api, q string, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := query(t, api, q)
		if len(got) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, %s answers %d series, not %d: %s", q, len(got), n, got)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
