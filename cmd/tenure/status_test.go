package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

func TestStatus(t *testing.T) {
	c := testCluster(t, "job", []string{"--quiet", "--ttl", "5s"}, nil)
	free := runTenure(t, "status", "--store", c.storeURL, "--key", "job")
	if free.code != exitFree || strings.TrimSpace(free.stdout) != "job: no leader (never granted)" {
		t.Fatalf("status of a never-granted key: code %d, %q", free.code, free.stdout)
	}
	if _, err := c.start("node-1"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.events.nextStart(0, wait); !ok {
		t.Fatal("no CMD started")
	}
	got, _ := heldStatus(t, c.storeURL, "job")
	if !got.Held || got.Holder != "node-1" || got.Term != 1 || got.TTLMs != 5000 || got.RemainingMs <= 0 || got.RemainingMs > 5000 {
		t.Fatalf("status --json = %+v, want node-1 holding term 1 with a 5s TTL", got)
	}
	human := runTenure(t, "status", "--store", c.storeURL, "--key", "job")
	if human.code != exitOK || !strings.HasPrefix(human.stdout, "job: node-1 leads, term 1, ttl 5s, ") {
		t.Fatalf("status = %d %q", human.code, human.stdout)
	}
}

// heldStatus runs `tenure status --json` on key, which must be held, and
// returns the record it printed, decoded and as printed.
func heldStatus(t *testing.T, store, key string) (recordJSON, string) {
	t.Helper()
	held := runTenure(t, "status", "--store", store, "--key", key, "--json")
	if held.code != exitOK {
		t.Fatalf("status of a held key: code %d, stderr %s", held.code, held.stderr)
	}
	var got recordJSON
	if err := json.Unmarshal([]byte(held.stdout), &got); err != nil {
		t.Fatalf("status --json printed %q: %v", held.stdout, err)
	}
	return got, held.stdout
}

func TestWatch(t *testing.T) {
	c := testCluster(t, "job", []string{"--quiet"}, nil)
	out, err := newLineReader(t, "watch", "--store", c.storeURL, "--key", "job", "--json")
	if err != nil {
		t.Fatal(err)
	}
	next := func(want string) recordJSON {
		t.Helper()
		return out.record(t, "a line for "+want)
	}
	if r := next("the initial state"); r.Held {
		t.Fatalf("first line %+v: want no leader", r)
	}
	if _, err := c.start("node-1"); err != nil {
		t.Fatal(err)
	}
	if r := next("node-1's election"); r.Holder != "node-1" || r.Term != 1 {
		t.Fatalf("got %+v, want node-1 in term 1", r)
	}
	if err := c.signal("node-1", syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if r := next("node-1's release"); r.Held || r.Term != 1 {
		t.Fatalf("got %+v, want no leader after term 1", r)
	}
	if _, err := c.start("node-2"); err != nil {
		t.Fatal(err)
	}
	if r := next("node-2's election"); r.Holder != "node-2" || r.Term != 2 {
		t.Fatalf("got %+v, want node-2 in term 2", r)
	}
	if code := out.interrupt(); code != 0 {
		t.Fatalf("watch exited %d after SIGINT, want 0", code)
	}
}

// lineReader runs tenure with its stdout read line by line.
type lineReader struct {
	t     testing.TB
	lines chan string
	stop  func() int
}

func newLineReader(t testing.TB, args ...string) (*lineReader, error) {
	cmd, done := startTenureWith(t, args...)
	pipe := cmd.stdout
	lr := &lineReader{t: t, lines: make(chan string, 64)}
	go func() {
		defer close(lr.lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
	}()
	lr.stop = func() int {
		_ = cmd.cmd.Process.Signal(syscall.SIGINT)
		waitDone(t, done, wait, "tenure watch")
		return exitCode(cmd.cmd.ProcessState)
	}
	return lr, nil
}

func (lr *lineReader) next() (string, bool) {
	select {
	case l, ok := <-lr.lines:
		return l, ok
	case <-afterWait():
		lr.t.Fatalf("no line from tenure within %s", wait)
		return "", false
	}
}

func (lr *lineReader) interrupt() int { return lr.stop() }

// record reads the next line of `tenure watch --json` for key job and
// decodes it, failing t if the output ended (want says what was expected)
// or the line is not a record of key job with a time.
func (lr *lineReader) record(t *testing.T, want string) recordJSON {
	t.Helper()
	line, ok := lr.next()
	if !ok {
		t.Fatalf("watch ended; want %s", want)
	}
	var r recordJSON
	if err := json.Unmarshal([]byte(line), &r); err != nil || r.Time == "" || r.Key != "job" {
		t.Fatalf("watch printed %q (%v); want a JSON record of key job with a time", line, err)
	}
	return r
}

// TestDescribeWithoutLeaseTime: a held record with no lease time (peer
// raft's: the group knows a leader, not a TTL) reads as held, without a
// "ttl 0s, 0s left" that would say it has expired.
func TestDescribeWithoutLeaseTime(t *testing.T) {
	got := describe(tenure.Record{Key: "job", Holder: "2", Term: 7})
	if want := "job: 2 leads, term 7"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
	got = describe(tenure.Record{Key: "job", Holder: "2", Term: 7, TTL: 2 * time.Second, Remaining: 1500 * time.Millisecond})
	if want := "job: 2 leads, term 7, ttl 2s, 1.5s left"; got != want {
		t.Errorf("describe = %q, want %q", got, want)
	}
}

// A holder written from outside, longer than tenure grants, in a script
// of more than one byte per character, is cut before a character: it
// stays readable instead of being quoted whole for a split character.
func TestDescribeCutsLongHolderBeforeACharacter(t *testing.T) {
	holder := "a" + strings.Repeat("ж", tenure.MaxIdentityLen) // 2 bytes each
	got := describe(tenure.Record{Key: "job", Holder: holder, Term: 7})
	kept := "a" + strings.Repeat("ж", (tenure.MaxIdentityLen-1)/2)
	want := fmt.Sprintf("job: %s... (%d bytes) leads, term 7", kept, len(holder))
	if got != want {
		t.Errorf("describe = %.80q..., want %.80q...", got, want)
	}
}
