package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// TestShardHTTPView: tenure shard --http serves the member's view: GET /
// names the keys it owns and leads, /readyz says it is live, /metrics has
// its counts labelled by group only (no series per key), a request through
// loopback for another host is refused as in tenure run's view, and the
// member still stops with 0 on SIGTERM.
func TestShardHTTPView(t *testing.T) {
	c, done := startLogged(t, nil, "shard", "--store", "file://"+t.TempDir(), "--group", "jobs", "--members", "a,b",
		"--id", "a", "--shards", "3", "--http", "127.0.0.1:0", "--", "sleep", "60")
	_, addr, _ := strings.Cut(c.awaitLog(t, "serving the --http view"), "addr=")
	addr, _, _ = strings.Cut(addr, " ")
	if addr == "" || strings.HasSuffix(addr, ":0") {
		t.Fatalf("tenure shard --http 127.0.0.1:0 did not log the address it serves on (got %q)", addr)
	}
	go c.readLog() // keep its stderr drained
	url := "http://" + addr

	var st shardStatus
	waitFor(t, func() bool {
		code, body := get(t, url+"/")
		st = shardStatus{}
		return code == 200 && json.Unmarshal([]byte(body), &st) == nil && len(st.Leading) == 3
	})
	want := shardStatus{Group: "jobs", ID: "a", Live: []string{"a"}, Owns: []string{"0", "1", "2"}, Leading: []string{"0", "1", "2"}}
	if st.Group != want.Group || st.ID != want.ID || !slices.Equal(st.Live, want.Live) || !slices.Equal(st.Owns, want.Owns) {
		t.Errorf("GET / = %+v, want %+v", st, want)
	}
	if code, body := get(t, url+"/readyz"); code != 200 {
		t.Errorf("GET /readyz: %d %q, want 200", code, body)
	}
	code, metrics := get(t, url+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, line := range []string{`tenure_shard_leading_keys{group="jobs"} 3`, `tenure_shard_owned_keys{group="jobs"} 3`,
		`tenure_shard_live_members{group="jobs"} 1`, `tenure_shard_member_live{group="jobs"} 1`, `tenure_shard_handoffs_total{group="jobs"} 0`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	series := 0
	for l := range strings.Lines(metrics) {
		if strings.HasPrefix(l, "tenure_shard_") {
			series++
		}
	}
	if series != 6 {
		t.Errorf("/metrics has %d tenure_shard_ series, want 6, whatever the keys:\n%s", series, metrics)
	}
	req, _ := http.NewRequest("GET", url+"/", nil)
	req.Host = "rebind.attacker.example"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET / with Host rebind.attacker.example through loopback: %v %v, want 421", resp, err)
	} else {
		resp.Body.Close()
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitDone(t, done, wait, "tenure shard")
	if code := exitCode(c.cmd.ProcessState); code != exitOK {
		t.Errorf("tenure shard --http exited %d after SIGTERM, want 0", code)
	}
}
