package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/electortest"
)

// peerGroup is a group of peer members run in the test process on
// loopback TCP (the tenure binary under test is the observer).
type peerGroup struct {
	t       *testing.T
	base    url.Values // the URL parameters every member and the observer share
	dir     string
	members map[uint64]tenure.Store
}

func newPeerGroup(t *testing.T, alg string, n int) *peerGroup {
	t.Helper()
	dir := t.TempDir()
	base := peerParams(t, alg, dir, n)
	base.Set("heartbeat", "50ms")
	base.Set("timeout", "300ms")
	g := &peerGroup{t: t, dir: dir, members: map[uint64]tenure.Store{}, base: base}
	t.Cleanup(func() {
		for id := range g.members {
			g.stop(id)
		}
	})
	for i := 1; i <= n; i++ {
		g.start(uint64(i))
	}
	return g
}

// observerURL is the group's URL without id: what `tenure status` gets.
func (g *peerGroup) observerURL() string { return "peer://?" + g.base.Encode() }

func (g *peerGroup) start(id uint64) {
	g.t.Helper()
	q := url.Values{"id": {strconv.FormatUint(id, 10)}, "state-dir": {g.dir}}
	for k, v := range g.base {
		q[k] = v
	}
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler)) // members' logs are noise here
	s, err := tenure.Open(context.Background(), "peer://?"+q.Encode())
	slog.SetDefault(prev)
	if err != nil {
		g.t.Fatalf("member %d: %v", id, err)
	}
	g.members[id] = s
}

func (g *peerGroup) stop(id uint64) {
	if s := g.members[id]; s != nil {
		s.Close()
		delete(g.members, id)
	}
}

// agreed waits, through `tenure watch` lines, until the observer reports a
// holder other than not, with a term above after, and want if want is set;
// it returns that record. Every line must differ
// from the one before (a line per change) and a holder's term never goes
// back.
func agreed(t *testing.T, lr *lineReader, want, not string, after uint64) recordJSON {
	t.Helper()
	var prev *recordJSON
	for {
		r := lr.record(t, fmt.Sprintf("a leader other than %q", not))
		if prev != nil && prev.Holder == r.Holder && prev.Term == r.Term {
			t.Fatalf("watch printed %+v twice in a row", r)
		}
		if r.Held && r.Term < after {
			t.Fatalf("watch went back to term %d after %d: %+v", r.Term, after, r)
		}
		if r.Held && r.Holder != not && r.Term > after && (want == "" || r.Holder == want) {
			return r
		}
		prev = &r
	}
}

// TestPeerStatusAndWatch: `tenure status` and `tenure watch` with a peer
// URL without id observe a running group without joining it.
func TestPeerStatusAndWatch(t *testing.T) {
	// The leader to wait for once all members run: bully settles on the
	// highest ID; any raft leader stays while it runs.
	for alg, settled := range map[string]string{"bully": "3", "raft": ""} {
		t.Run(alg, func(t *testing.T) {
			g := newPeerGroup(t, alg, 3)
			w, err := newLineReader(t, "watch", "--store", g.observerURL(), "--key", "job", "--json")
			if err != nil {
				t.Fatal(err)
			}
			first := statusAgrees(t, g, w, agreed(t, w, settled, "", 0))
			leader, err := strconv.ParseUint(first.Holder, 10, 64)
			if err != nil || g.members[leader] == nil {
				t.Fatalf("watch reports holder %q, not a member", first.Holder)
			}
			g.stop(leader)
			next := agreed(t, w, "", first.Holder, first.Term)
			if id, _ := strconv.ParseUint(next.Holder, 10, 64); g.members[id] == nil {
				t.Fatalf("watch reports %q after the kill, not a running member", next.Holder)
			}
			if code := w.interrupt(); code != exitOK {
				t.Fatalf("tenure watch exited %d after SIGINT", code)
			}
		})
	}
}

// statusAgrees checks that `tenure status` on g's observer URL, JSON and
// text, reports the holder and term the watch w reported last (cur), and
// returns the record they agreed on. Under load a member's failure
// detector can fire and the group elect again between the watch's line
// and a status read: then the watch must come to the term status saw, and
// both are compared again.
func statusAgrees(t *testing.T, g *peerGroup, w *lineReader, cur recordJSON) recordJSON {
	t.Helper()
	for range 5 {
		got := peerStatus(t, g)
		if got.Held && got.Term > cur.Term {
			cur = agreed(t, w, "", "", got.Term-1)
			continue
		}
		if !got.Held || got.Holder != cur.Holder || got.Term != cur.Term {
			t.Fatalf("status = %+v; watch said %s in term %d", got, cur.Holder, cur.Term)
		}
		human := runTenure(t, "status", "--store", g.observerURL(), "--key", "job")
		t.Logf("tenure status: %s", strings.TrimSpace(human.stdout))
		want := "job: " + cur.Holder + " leads, term " + strconv.FormatUint(cur.Term, 10)
		if human.code == exitOK && strings.HasPrefix(human.stdout, want) {
			return cur
		}
		if again := peerStatus(t, g); !again.Held || again.Term <= cur.Term {
			t.Fatalf("status = %d %q, want %q...", human.code, human.stdout, want)
		}
	}
	t.Fatalf("the group elected again at each of 5 status reads")
	return cur
}

// peerStatus is `tenure status --json` on g's observer URL.
func peerStatus(t *testing.T, g *peerGroup) recordJSON {
	t.Helper()
	st := runTenure(t, "status", "--store", g.observerURL(), "--key", "job", "--json")
	if st.code != exitOK {
		t.Fatalf("tenure status exited %d; stderr %s", st.code, st.stderr)
	}
	var got recordJSON
	if err := json.Unmarshal([]byte(st.stdout), &got); err != nil {
		t.Fatalf("status --json printed %q: %v", st.stdout, err)
	}
	return got
}

// TestPeerStatusErrors: without the secret, or with no member up, `tenure
// status` on an observer URL exits 1 naming the members and nothing else;
// a campaign with an observer URL is refused as a bad store URL.
func TestPeerStatusErrors(t *testing.T) {
	g := newPeerGroup(t, "ring", 3)
	wrong := filepath.Join(t.TempDir(), "wrong.secret")
	if err := os.WriteFile(wrong, []byte("not-the-group-secret-but-long-enough-4567\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	q := url.Values{}
	for k, v := range g.base {
		q[k] = v
	}
	q.Set("secret-file", wrong)
	r := runTenure(t, "status", "--store", "peer://?"+q.Encode(), "--key", "job")
	if r.code != exitRuntime || r.stdout != "" || !strings.Contains(r.stderr, "no member answered") ||
		strings.Contains(r.stderr, "not-the-group-secret") || strings.Contains(r.stderr, "a-cli-test-secret") {
		t.Fatalf("status with the wrong secret: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runTenure(t, "run", "--store", g.observerURL(), "--key", "job", "--", "true")
	if r.code == exitOK || !strings.Contains(r.stderr, "add id=N") {
		t.Fatalf("run with an observer URL: code %d, stderr %q", r.code, r.stderr)
	}
	for id := range uint64(3) {
		g.stop(id + 1)
	}
	r = runTenure(t, "status", "--store", g.observerURL(), "--key", "job")
	if r.code != exitRuntime || !strings.Contains(r.stderr, "member 3 at 127.0.0.1:") {
		t.Fatalf("status with every member down: code %d, stderr %q", r.code, r.stderr)
	}
}

// TestPeerAdvertise: in every peer mode, the value the coordinator's
// elector publishes reaches `tenure status` and `tenure watch` on an
// observer URL (in lowest, bully and ring the coordinator's status replies
// carry it; in raft every member's do). Every member campaigns, each
// publishing its own value.
func TestPeerAdvertise(t *testing.T) {
	for _, alg := range []string{"bully", "lowest", "ring", "raft"} {
		t.Run(alg, func(t *testing.T) {
			g := newPeerGroup(t, alg, 3)
			elected := make(chan string, 3)
			for id, st := range g.members {
				campaignWithValue(t, st, strconv.FormatUint(id, 10), elected)
			}
			var leader string
			select {
			case leader = <-elected:
			case <-afterWait():
				t.Fatalf("no member was elected within %s", wait)
			}
			value := "10.0.0." + leader + ":8080"
			st := runTenure(t, "status", "--store", g.observerURL(), "--key", "job", "--json")
			var got recordJSON
			if err := json.Unmarshal([]byte(st.stdout), &got); err != nil || got.Holder != leader || got.Value != value {
				t.Fatalf("status --json: exit %d, %q (%v); want holder %s with value %q", st.code, st.stdout, err, leader, value)
			}
			w, err := newLineReader(t, "watch", "--store", g.observerURL(), "--key", "job", "--json")
			if err != nil {
				t.Fatal(err)
			}
			for r := w.record(t, "the value"); r.Value != value; r = w.record(t, "the value") {
			}
		})
	}
}

// campaignWithValue runs an elector for member id of st until the test
// ends, publishing "10.0.0.ID:8080"; its identity goes to elected each
// time it is elected.
func campaignWithValue(t *testing.T, st tenure.Store, id string, elected chan<- string) {
	t.Helper()
	e, err := tenure.New(tenure.Config{Store: st, Key: "job", Identity: id, Value: "10.0.0." + id + ":8080",
		Logger: slog.New(slog.DiscardHandler), OnEvent: func(ev tenure.Event) {
			if ev.Kind == tenure.EventElected {
				select {
				case elected <- id:
				default:
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	electortest.Run(t, e, electortest.TaskUntil(nil))
}
