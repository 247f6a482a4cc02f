package promtenure

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/electortest"
	"github.com/tenurehq/tenure/store/memory"
)

const key = "job"

// scrape returns the registry's text exposition.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return w.Body.String()
}

// has fails unless the exposition has each line.
func has(t *testing.T, who, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, "\n"+l+"\n") {
			t.Errorf("%s: no line %q in\n%s", who, l, text)
		}
	}
}

type candidate struct {
	reg    *prometheus.Registry
	resign chan struct{}
}

func newCandidate(t *testing.T, store tenure.Store, id string) *candidate {
	c := &candidate{reg: prometheus.NewRegistry(), resign: make(chan struct{})}
	m := New(key)
	c.reg.MustRegister(m)
	cfg := tenure.Config{
		Store: store, Key: key, Identity: id, TTL: time.Second,
		Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewPCG(1, uint64(len(id)))),
	}
	cfg.OnEvent = m.OnEvent(cfg.OnEvent)
	e, err := tenure.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	electortest.Run(t, e, electortest.TaskUntil(c.resign))
	return c
}

func TestLeaderAndFollowerMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		a := newCandidate(t, store.Handle(), "a")
		synctest.Wait()
		b := newCandidate(t, store.Handle(), "b")
		synctest.Wait()
		time.Sleep(10 * time.Second) // a renews; b waits
		synctest.Wait()

		ma, mb := scrape(t, a.reg), scrape(t, b.reg)
		has(t, "leader a", ma,
			`leader_election_master_status{name="job"} 1`,
			`tenure_is_leader{key="job"} 1`,
			`tenure_term{key="job"} 1`,
			`tenure_acquire_attempts_total{key="job"} 1`,
			`tenure_acquire_failures_total{key="job",reason="held"} 0`,
			`tenure_leadership_transitions_total{key="job"} 0`,
			`tenure_task_stalls_total{key="job"} 0`,
			`tenure_task_overruns_total{key="job"} 0`,
			`tenure_renew_failures_total{key="job"} 0`,
		)
		if !strings.Contains(ma, `tenure_renew_latency_seconds_count{key="job"} `) ||
			strings.Contains(ma, `tenure_renew_latency_seconds_count{key="job"} 0`) {
			t.Errorf("leader a observed no renewal latency:\n%s", ma)
		}
		has(t, "follower b", mb,
			`leader_election_master_status{name="job"} 0`,
			`tenure_is_leader{key="job"} 0`,
			`tenure_term{key="job"} 1`,
			`tenure_leadership_lost_total{key="job",reason="lost"} 0`,
		)

		close(a.resign)
		synctest.Wait()
		ma, mb = scrape(t, a.reg), scrape(t, b.reg)
		has(t, "a after stepping down", ma,
			`leader_election_master_status{name="job"} 0`,
			`tenure_leadership_lost_total{key="job",reason="task_returned"} 1`,
		)
		has(t, "b after taking over", mb,
			`leader_election_master_status{name="job"} 1`,
			`tenure_term{key="job"} 2`,
			`tenure_leadership_transitions_total{key="job"} 1`,
		)
	})
}

func TestEventReasons(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(key)
	reg.MustRegister(m)
	on := m.OnEvent(nil)
	for _, ev := range []tenure.Event{
		{Kind: tenure.EventLost, Err: tenure.ErrStalled},
		{Kind: tenure.EventLost, Err: tenure.ErrRenewDeadline},
		{Kind: tenure.EventLost, Err: tenure.ErrLost},
		{Kind: tenure.EventReleased, Err: context.Canceled},
		{Kind: tenure.EventRenewFailed, Err: errors.New("timeout")},
		{Kind: tenure.EventTaskOverrun},
		{Kind: tenure.EventTaskOverrun, Key: "other"}, // another key: not counted
	} {
		if ev.Key == "" {
			ev.Key = key
		}
		on(ev)
	}
	has(t, "events", scrape(t, reg),
		`tenure_leadership_lost_total{key="job",reason="stalled"} 1`,
		`tenure_leadership_lost_total{key="job",reason="renew_deadline"} 1`,
		`tenure_leadership_lost_total{key="job",reason="lost"} 1`,
		`tenure_leadership_lost_total{key="job",reason="shutdown"} 1`,
		`tenure_task_stalls_total{key="job"} 1`,
		`tenure_task_overruns_total{key="job"} 1`,
		`tenure_renew_failures_total{key="job"} 1`,
	)
}

func TestObserverMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		reg := prometheus.NewRegistry()
		m := New(key)
		reg.MustRegister(m)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go m.Run(ctx, store)
		for _, id := range []string{"a", "b"} {
			l, err := store.Acquire(ctx, key, id, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if err := store.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		has(t, "observer", scrape(t, reg),
			`leader_election_master_status{name="job"} 0`,
			`tenure_term{key="job"} 2`,
			`tenure_leadership_transitions_total{key="job"} 1`,
		)
	})
}

// TestObserveAfterAForgedHigherTerm: a term written far above the key's
// counter (HSET term 1000000 on Redis), then a real grant at the
// counter's next term, which the Observer delivers once the store showed
// it for a TTL. The term gauge and the transitions must follow it instead
// of keeping the forged term for good; an elector's event and a record of
// an older term merely read late stay ignored.
func TestObserveAfterAForgedHigherTerm(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(key)
	reg.MustRegister(m)
	m.Observe(tenure.Record{Key: key, Holder: "alpha", Term: 3})
	m.Observe(tenure.Record{Key: key, Holder: "alpha", Term: 1000000})
	m.Observe(tenure.Record{Key: key, Holder: "beta", Term: 4})
	has(t, "after beta's grant below the forged term", scrape(t, reg),
		`tenure_term{key="job"} 4`,
		`tenure_leadership_transitions_total{key="job"} 2`,
	)
	m.OnEvent(nil)(tenure.Event{Kind: tenure.EventLeaderChanged, Key: key, Holder: "gamma", Term: 5})
	m.Observe(tenure.Record{Key: key, Term: 4}) // read before gamma's term: not news
	has(t, "after gamma's term, then a late record of beta's", scrape(t, reg),
		`tenure_term{key="job"} 5`,
		`tenure_leadership_transitions_total{key="job"} 3`,
	)
}

// TestSessionElectorHasNoEmptyHistogram: an elector leading through a
// Session never renews on its own, so its renewal histogram stays empty;
// it used to be exported anyway, 17 of each key's 32 series (a scrape of
// 10,000 such keys: 20 MB, 0.9 s of CPU). It is exported from the first
// renewal on.
func TestSessionElectorHasNoEmptyHistogram(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		sess, err := tenure.NewSession(tenure.SessionConfig{Store: store, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close(context.Background())
		reg := prometheus.NewRegistry()
		m := New(key)
		reg.MustRegister(m)
		cfg := tenure.Config{Session: sess, Key: key, Identity: "a", Logger: slog.New(slog.DiscardHandler)}
		cfg.OnEvent = m.OnEvent(nil)
		e, err := tenure.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		resign := make(chan struct{})
		electortest.Run(t, e, electortest.TaskUntil(resign))
		time.Sleep(10 * time.Second) // the session renews ten times
		synctest.Wait()
		text := scrape(t, reg)
		has(t, "a session's leader", text, `tenure_is_leader{key="job"} 1`)
		if strings.Contains(text, "tenure_renew_latency_seconds") {
			t.Errorf("a session's leader, which never renews on its own, exports the renewal histogram:\n%s", text)
		}
		m.OnEvent(nil)(tenure.Event{Kind: tenure.EventRenewed, Key: key, Took: 3 * time.Millisecond})
		has(t, "after a renewal", scrape(t, reg), `tenure_renew_latency_seconds_count{key="job"} 1`)
		close(resign)
		synctest.Wait()
	})
}
