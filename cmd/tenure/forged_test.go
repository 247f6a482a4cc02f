package main

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/redis"
)

// TestHTTPViewFollowsAfterAForgedHigherTerm: the term of a held key
// rewritten far above the key's counter with redis-cli HSET, then the
// lease deleted and the key granted again at the counter's next term.
// `tenure watch --http` delivers the new grant once the store showed it
// for a TTL (TestObserverFollowsAfterAForgedHigherTerm, in store/redis);
// its view at / and its /metrics must show it too, instead of the forged
// term for good. 2 to 30 s: the TTL of the last record delivered (alpha's
// 1 s, or DefaultTTL if the watch delivered the key free after the
// deletion), waited out by the store's watch and by the observer.
func TestHTTPViewFollowsAfterAForgedHigherTerm(t *testing.T) {
	t.Parallel()
	srv := testserver.Redis(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const key = "forged"
	st, err := redis.Open(ctx, srv.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Acquire(ctx, key, "alpha", time.Second); err != nil {
		t.Fatal(err)
	}
	addr := testserver.FreeAddr(t)
	lines := watchLines(t, "watch", "--store", srv.URL(0), "--key", key, "--http", addr)
	var view struct {
		Name        string `json:"name"`
		Term        uint64 `json:"term"`
		Transitions uint64 `json:"transitions"`
	}
	waitFor(t, func() bool { getJSON(t, "http://"+addr+"/", &view); return view.Name == "alpha" })

	opt, err := goredis.ParseURL(srv.URL(0))
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opt)
	defer c.Close()
	lease := redis.DefaultPrefix + ":{" + key + "}:lease"
	if err := c.HSet(ctx, lease, "term", "1000000").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { getJSON(t, "http://"+addr+"/", &view); return view.Term == 1000000 })
	if err := c.Del(ctx, lease).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := st.Acquire(ctx, key, "beta", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.Term >= 1000000 {
		t.Fatalf("beta's term %d: want the counter's, below the forged one", l.Term)
	}
	// tenure watch prints a record after it fed it to the view and the
	// metrics.
	var printed []string
	for limit := time.After(2 * time.Minute); len(printed) == 0 || !strings.Contains(printed[len(printed)-1], "beta leads"); {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("tenure watch ended; it printed %q", printed)
			}
			printed = append(printed, line)
		case <-limit:
			t.Fatalf("tenure watch never printed beta's grant in term %d within 2 minutes; it printed %q", l.Term, printed)
		}
	}
	gauge := fmt.Sprintf("\ntenure_term{key=%q} %d\n", key, l.Term)
	// Polled for a few seconds: the view takes the record from the
	// printing goroutine without telling anyone.
	for limit := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		getJSON(t, "http://"+addr+"/", &view)
		_, metrics := get(t, "http://"+addr+"/metrics")
		if view.Name == "beta" && view.Term == l.Term && strings.Contains(metrics, gauge) {
			break
		}
		if time.Now().After(limit) {
			t.Fatalf("tenure watch printed beta's grant in term %d, but 10 s later its view at / shows %+v and its /metrics has %q: %t",
				l.Term, view, strings.TrimSpace(gauge), strings.Contains(metrics, gauge))
		}
	}
	if view.Transitions < 2 {
		t.Errorf("the view counts %d transitions, want at least 2 (alpha's forged term, beta's)", view.Transitions)
	}
}

// watchLines starts tenure with args, stopped with SIGTERM at the end of
// the test, and returns the lines it prints, closed when it exits.
func watchLines(t *testing.T, args ...string) <-chan string {
	t.Helper()
	w, done := startTenureWith(t, args...)
	t.Cleanup(func() { _ = w.cmd.Process.Signal(syscall.SIGTERM); <-done })
	lines := make(chan string, 64)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(w.stdout); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	return lines
}
