package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/internal/testserver"
)

// holdKey starts a `tenure run` that leads key on store with a long
// sleep as its command, and returns once it leads (it prints "leading").
func holdKey(t *testing.T, store, key string, extra ...string) *exec.Cmd {
	t.Helper()
	args := append([]string{"run", "--store", store, "--key", key, "--id", "holder", "--quiet"}, extra...)
	args = append(args, "--", "sh", "-c", "echo leading; exec sleep 60")
	cmd := exec.Command(tenureBin, args...)
	line, err := bufio.NewReader(startPiped(t, cmd, syscall.SIGTERM)).ReadString('\n')
	if err != nil || line != "leading\n" {
		t.Fatalf("the holder did not start leading: %q, %v", line, err)
	}
	return cmd
}

// TestRunTryAndWaitGiveUpOnAHeldKey: with the key held, --try exits 75 at
// once and --wait exits 75 after its duration; neither runs CMD.
func TestRunTryAndWaitGiveUpOnAHeldKey(t *testing.T) {
	store := "file://" + t.TempDir()
	holdKey(t, store, "cron")
	for _, flag := range [][]string{{"--try"}, {"--wait", "700ms"}} {
		began := time.Now()
		r := runTenure(t, append(append([]string{"run", "--store", store, "--key", "cron"}, flag...), "--", "echo", "ran")...)
		took := time.Since(began)
		if r.code != exitHeld || strings.Contains(r.stdout, "ran") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %s; want %d and CMD not run", flag, r.code, r.stdout, r.stderr, exitHeld)
		}
		if flag[0] == "--wait" && took < 700*time.Millisecond {
			t.Fatalf("--wait 700ms gave up after %s", took)
		}
	}
	// A free key: --try runs CMD and passes its exit code through.
	r := runTenure(t, "run", "--store", store, "--key", "free", "--try", "--", "sh", "-c", "echo ran; exit 7")
	if r.code != 7 || strings.TrimSpace(r.stdout) != "ran" {
		t.Fatalf("--try on a free key: exit %d, stdout %q; want 7 and \"ran\"", r.code, r.stdout)
	}
}

// TestRunTryWaitBadCombinations: --try and --wait combinations that make
// no sense are usage errors. Among them --wait 0 ("$WAIT" with WAIT=0, to
// mean "do not wait"), which used to campaign without a limit: a cron job
// queued up behind the holder, what --wait is there to prevent.
func TestRunTryWaitBadCombinations(t *testing.T) {
	// A case wrongly accepted must not run on the user's local store.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, args := range [][]string{
		{"--try", "--restart"}, {"--wait", "1s", "--restart"}, {"--try", "--wait", "1s"}, {"--wait", "-1s"},
		{"--log-format", "xml"}, {"--wait", "0"}, {"--wait", "0s"},
	} {
		r := runTenure(t, append(append([]string{"run", "--key", "k"}, args...), "--", "true")...)
		if r.code != exitUsage || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want %d and one line", args, r.code, r.stderr, exitUsage)
		}
	}
}

// TestKeyAndIDFromEnvironment: $TENURE_KEY and $TENURE_ID stand in for
// --key and --id, and CMD sees them.
func TestKeyAndIDFromEnvironment(t *testing.T) {
	cmd := exec.Command(tenureBin, "run", "--store", "file://"+t.TempDir(), "--", "sh", "-c", `echo "$TENURE_KEY $TENURE_ID"`)
	cmd.Env = append(os.Environ(), "TENURE_KEY=envkey", "TENURE_ID=envid")
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != "envkey envid" {
		t.Fatalf("output %q, %v; want \"envkey envid\"", out, err)
	}
}

// TestLogFormatJSON: every log line of --log-format json is one JSON object
// with the key, the identity and, once elected, the term.
func TestLogFormatJSON(t *testing.T) {
	r := runTenure(t, "run", "--store", "file://"+t.TempDir(), "--key", "logs", "--id", "me", "--log-format", "json", "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	sawTerm := false
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if m["key"] != "logs" || m["id"] != "me" {
			t.Fatalf("log line %q lacks key=logs id=me", line)
		}
		sawTerm = sawTerm || m["term"] != nil
	}
	if !sawTerm {
		t.Fatalf("no log line carries the term:\n%s", r.stderr)
	}
}

// TestLogFormatJSONOnSignal: the line tenure run logs when it forwards a
// signal to CMD carries the key and the identity too, as every line of
// --log-format json does. It used to carry only the signal and the group.
func TestLogFormatJSONOnSignal(t *testing.T) {
	var stderr syncbuf.Buffer
	cmd := exec.Command(tenureBin, "run", "--store", "file://"+t.TempDir(), "--key", "logs", "--id", "me", "--log-format", "json",
		"--", "sh", "-c", "echo started; exec sleep 60")
	cmd.Stderr = &stderr
	out := startPiped(t, cmd, syscall.SIGKILL)
	if line, err := bufio.NewReader(out).ReadString('\n'); line != "started\n" {
		t.Fatalf("CMD said %q (%v); want started", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); exitCode(cmd.ProcessState) != 128+int(syscall.SIGTERM) {
		t.Fatalf("tenure run on SIGTERM: %v; want CMD's 143", err)
	}
	forwarded := false
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if m["key"] != "logs" || m["id"] != "me" {
			t.Errorf("log line %q lacks key=logs id=me", line)
		}
		forwarded = forwarded || strings.Contains(line, "forwarding signal")
	}
	if !forwarded {
		t.Fatalf("no log line says the signal was forwarded:\n%s", stderr.String())
	}
}

// TestLogFormatJSONCommandCannotStart: when CMD cannot be started once
// elected (a script whose interpreter is missing: found on $PATH, refused
// by exec), the supervisor's line saying why is JSON with the key and the
// identity under --log-format json, as tenure's own are. It used to be the
// plain line "tenure: cannot start ...", in the middle of the JSON log.
func TestLogFormatJSONCommandCannotStart(t *testing.T) {
	dir := t.TempDir()
	script := dir + "/job.sh"
	if err := os.WriteFile(script, []byte("#!/nonexistent/interpreter\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	r := runTenure(t, "run", "--store", "file://"+dir, "--key", "logs", "--id", "me", "--log-format", "json", "--", script)
	if r.code != 126 {
		t.Fatalf("exit %d, want 126 (CMD could not be run); stderr:\n%s", r.code, r.stderr)
	}
	said := false
	for _, line := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		if m["key"] != "logs" || m["id"] != "me" {
			t.Errorf("log line %q lacks key=logs id=me", line)
		}
		said = said || m["msg"] == "tenure: cannot start "+script && strings.Contains(fmt.Sprint(m["err"]), "no such file")
	}
	if !said {
		t.Fatalf("no log line says why CMD could not start:\n%s", r.stderr)
	}
}

// TestHTTPView: the leader's and an observer's --http answer who leads,
// readiness, and Prometheus metrics, as a client would ask them.
func TestHTTPView(t *testing.T) {
	store := "file://" + t.TempDir()
	leaderAddr, watchAddr := testserver.FreeAddr(t), testserver.FreeAddr(t)
	holdKey(t, store, "web", "--http", leaderAddr)
	var wout bytes.Buffer
	var werr bytes.Buffer
	w, done := startTenure(t, &wout, &werr, "watch", "--store", store, "--key", "web", "--http", watchAddr)
	t.Cleanup(func() { _ = w.Process.Signal(syscall.SIGTERM); <-done })

	var view struct {
		Name   string `json:"name"`
		Term   uint64 `json:"term"`
		IsSelf bool   `json:"is_self"`
	}
	getJSON(t, "http://"+leaderAddr+"/", &view)
	if view.Name != "holder" || view.Term == 0 || !view.IsSelf {
		t.Fatalf("the leader's view: %+v, want name holder, a term, is_self", view)
	}
	waitFor(t, func() bool { getJSON(t, "http://"+watchAddr+"/", &view); return view.Name == "holder" })
	if view.IsSelf {
		t.Fatal("the observer's view says is_self")
	}
	for _, c := range []struct {
		url  string
		want int
	}{
		{"http://" + leaderAddr + "/readyz", 200},
		{"http://" + watchAddr + "/readyz", 503},
		{"http://" + watchAddr + "/readyz?standbyok", 200},
		{"http://" + leaderAddr + "/healthz", 200},
	} {
		if code, _ := get(t, c.url); code != c.want {
			t.Errorf("GET %s: %d, want %d", c.url, code, c.want)
		}
	}
	_, metrics := get(t, "http://"+leaderAddr+"/metrics")
	if !strings.Contains(metrics, `leader_election_master_status{name="web"} 1`) {
		t.Errorf("the leader's /metrics lacks leader_election_master_status 1:\n%.2000s", metrics)
	}
	_, metrics = get(t, "http://"+watchAddr+"/metrics")
	if !strings.Contains(metrics, `leader_election_master_status{name="web"} 0`) || !strings.Contains(metrics, `tenure_term{key="web"}`) {
		t.Errorf("the observer's /metrics lacks its gauges:\n%.2000s", metrics)
	}
}

// TestHTTPFloodKeepsTheLeader: connections to --http that never send a
// request (a broken dashboard, a port scanner, a hostile neighbour) must
// not take the file descriptors the leader needs to renew. tenure runs
// under a limit of 200 descriptors while 300 such connections are held
// open: it must go on renewing the same term, and the view must answer
// once they close. Before --http bounded its connections, the renewals
// failed with "too many open files" and the leader stepped down within a
// TTL.
func TestHTTPFloodKeepsTheLeader(t *testing.T) {
	store, addr := "file://"+t.TempDir(), testserver.FreeAddr(t)
	cmd := exec.Command("sh", "-c", `ulimit -n 200 && exec "$@"`, "sh", tenureBin, "run", "--store", store, "--key", "flood",
		"--id", "holder", "--ttl", "1s", "--quiet", "--http", addr, "--", "sh", "-c", "echo leading; exec sleep 60")
	if line, err := bufio.NewReader(startPiped(t, cmd, syscall.SIGTERM)).ReadString('\n'); err != nil || line != "leading\n" {
		t.Fatalf("the holder did not start leading: %q, %v", line, err)
	}
	var view struct {
		Name string `json:"name"`
		Term uint64 `json:"term"`
	}
	getJSON(t, "http://"+addr+"/", &view)
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 300 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", len(flood)+1, err)
		}
		flood = append(flood, c)
	}
	opened := time.Now()
	// TTL 1s: a renewal every 333 ms. Wait for those of the next second.
	waitFor(t, func() bool {
		var st struct {
			Held   bool      `json:"held"`
			Holder string    `json:"holder"`
			Term   uint64    `json:"term"`
			Renew  time.Time `json:"renew_time"`
		}
		r := runTenure(t, "status", "--store", store, "--key", "flood", "--json")
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("tenure status --json: %v: %q %s", err, r.stdout, r.stderr)
		}
		if !st.Held || st.Holder != "holder" || st.Term != view.Term {
			t.Fatalf("leadership moved while 300 connections were held open: %+v, was term %d", st, view.Term)
		}
		return st.Renew.After(opened.Add(time.Second))
	})
	for _, c := range flood {
		c.Close()
	}
	flood = nil
	getJSON(t, "http://"+addr+"/", &view)
	if view.Name != "holder" {
		t.Fatalf("after the flood, the view says %q leads", view.Name)
	}
}

// TestHTTPAddressInUse: a --http address that cannot be bound fails the
// command before it campaigns, in one line.
func TestHTTPAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	r := runTenure(t, "run", "--store", "file://"+t.TempDir(), "--key", "k", "--http", ln.Addr().String(), "--", "echo", "ran")
	if r.code != exitRuntime || strings.Contains(r.stdout, "ran") || !strings.Contains(r.stderr, "--http") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 1, CMD not run, an error naming --http", r.code, r.stdout, r.stderr)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	waitFor(t, func() bool { resp, err = http.Get(url); return err == nil })
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := get(t, url)
	if code != 200 || json.Unmarshal([]byte(body), v) != nil {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
}

// waitFor polls cond for up to 10 s: an outside process answers when it
// is ready, and there is no event to wait on.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal(fmt.Errorf("condition not met within 10s"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDefaultStoreIsSaid: a tenure run given no store says, in its log,
// that it uses the local store, which elects among one host's processes
// only; given one, it does not.
func TestDefaultStoreIsSaid(t *testing.T) {
	const said = "using the local store, which elects among this host's processes only"
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--store", "file://" + t.TempDir()}, false},
	} {
		cmd := exec.Command(tenureBin, append(append([]string{"run", "--key", "k"}, c.args...), "--", "true")...)
		cmd.Env = append(environWithout(envStore), "XDG_STATE_HOME="+t.TempDir())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %v: %s", c.args, err, stderr.String())
		}
		if got := strings.Contains(stderr.String(), said); got != c.want {
			t.Errorf("%v: the log says %q: %v, want %v:\n%s", c.args, said, got, c.want, stderr.String())
		}
	}
}
