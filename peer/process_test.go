package peer_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// TestHelperProcess is not a test: it is a member process of
// TestMultiProcess. It opens the node named by TENURE_PEER_CHILD_URL and
// prints "leader=<holder> term=<term>" each time the coordinator changes.
func TestHelperProcess(t *testing.T) {
	raw := os.Getenv("TENURE_PEER_CHILD_URL")
	if raw == "" {
		t.Skip("helper process for TestMultiProcess")
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	ctx := context.Background()
	st, err := tenure.Open(ctx, raw)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	w, err := st.Watch(ctx, "job")
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	for r := range w {
		fmt.Printf("leader=%s term=%d\n", r.Holder, r.Term)
	}
	os.Exit(0)
}

type report struct {
	member uint64
	leader string
	term   uint64
}

// TestMultiProcess runs a Bully group as three processes on loopback TCP,
// kills the coordinator's process with SIGKILL, checks that the others
// elect member 2 under a higher epoch, then restarts member 3 on its state
// directory: it takes over again under a still higher epoch.
func TestMultiProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	g := newTCPGroup(t, "bully", 3)
	reports := make(chan report, 64)
	procs := map[uint64]*exec.Cmd{}
	start := func(id uint64) {
		dir := filepath.Join(g.dir, strconv.FormatUint(id, 10)) // one state dir per "host"
		u := strings.Replace(g.url(id), "state-dir="+g.dir, "state-dir="+dir, 1)
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), "TENURE_PEER_CHILD_URL="+u)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[id] = cmd
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var r report
				r.member = id
				if _, err := fmt.Sscanf(sc.Text(), "leader=%s term=%d", &r.leader, &r.term); err != nil {
					// "leader= term=N" (no coordinator) does not scan as %s.
					continue
				}
				reports <- r
			}
		}()
	}
	kill := func(id uint64) {
		procs[id].Process.Kill()
		procs[id].Wait()
		delete(procs, id)
	}
	t.Cleanup(func() {
		for id := range procs {
			kill(id)
		}
	})
	await := func(leader string, min uint64, members ...uint64) uint64 {
		t.Helper()
		return awaitReports(t, reports, leader, min, members...)
	}
	for id := uint64(1); id <= 3; id++ {
		start(id)
	}
	t1 := await("3", 0, 1, 2, 3)
	kill(3)
	t2 := await("2", t1, 1, 2)
	start(3)
	t3 := await("3", t2, 1, 2, 3)
	t.Logf("terms: %d, after SIGKILL of member 3: %d, after its restart: %d", t1, t2, t3)
}

// awaitReports waits until each of members reports following leader, above
// term min, and returns the term.
func awaitReports(t *testing.T, reports <-chan report, leader string, min uint64, members ...uint64) uint64 {
	t.Helper()
	seen := map[uint64]uint64{}
	deadline := time.After(15 * time.Second)
	for len(seen) < len(members) {
		select {
		case r := <-reports:
			if r.leader == leader && r.term > min {
				seen[r.member] = r.term
			} else {
				delete(seen, r.member)
			}
		case <-deadline:
			t.Fatalf("members %v did not all follow %s above term %d (saw %v)", members, leader, min, seen)
		}
	}
	var term uint64
	for _, tm := range seen {
		if term != 0 && tm != term {
			t.Fatalf("members follow %s at different terms: %v", leader, seen)
		}
		term = tm
	}
	return term
}
