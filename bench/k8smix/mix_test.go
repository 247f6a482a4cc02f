package k8smix

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/history"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/k8s"
)

func init() { klog.SetLogger(logr.Discard()) } // leaderelection logs every attempt

// The timing of both kinds of candidate. client-go's elector cancels its
// leader context only after its release on cancel, which may itself take
// a RenewDeadline; so its task can run for RetryPeriod + 2×RenewDeadline
// after its last successful renewal, and the lease duration must exceed
// that (client-go's defaults, 15 s / 10 s / 2 s, do not). tenure's TTL is
// the same lease duration.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 1500 * time.Millisecond
	retryPeriod   = 300 * time.Millisecond
	leaseName     = "mixed-fleet"
)

// journal is every candidate's own log of when its leader code started
// and stopped, on the test's one monotonic clock.
type journal struct {
	t0     time.Time
	mu     sync.Mutex
	ivs    map[string]*history.Interval // per incarnation
	kind   map[string]string
	leader map[string]bool // incarnations leading now
	notify chan struct{}
}

func newJournal() *journal {
	return &journal{t0: time.Now(), ivs: map[string]*history.Interval{}, kind: map[string]string{},
		leader: map[string]bool{}, notify: make(chan struct{}, 1)}
}

func (j *journal) now() time.Duration { return time.Since(j.t0) }

func (j *journal) ping() {
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

// started is logged by a candidate's leader code as it starts.
func (j *journal) started(id, kind string, term uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	key := fmt.Sprintf("%s#%d", id, len(j.ivs))
	j.ivs[key] = &history.Interval{ID: id, Term: term, Start: j.now(), End: history.Live}
	j.kind[key] = kind
	j.leader[key] = true
	j.ping()
}

// stopped is logged by the leader code as it stops, and by the harness
// when it kills the process (nothing of a dead process leads).
func (j *journal) stopped(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for key, iv := range j.ivs {
		if iv.ID == id && iv.Open() {
			iv.End = j.now()
			delete(j.leader, key)
		}
	}
	j.ping()
}

// leading returns the incarnations leading now.
func (j *journal) leading() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for key := range j.leader {
		out = append(out, j.ivs[key].ID)
	}
	return out
}

// candidate is one incarnation of a pod: its own API client behind its
// own faults.
type candidate struct {
	id, kind string
	f        *faults
	cancel   context.CancelFunc
	done     chan struct{}
}

// run runs loop in a goroutine until c is stopped: c.cancel ends loop's
// context, and c.done is closed once loop returned.
func (c *candidate) run(loop func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() {
		defer close(c.done)
		loop(ctx)
	}()
}

func clientConfig(t *testing.T, kubeconfig string, f *faults) *rest.Config {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return f })
	return cfg
}

// startClientGo runs client-go's elector as its users do: Run, and when
// it returns (leadership lost), a new elector, until ctx ends.
// ReleaseOnCancel is on, so a graceful stop writes an empty holder.
func startClientGo(t *testing.T, j *journal, kubeconfig, id string) *candidate {
	c := &candidate{id: id, kind: "client-go", f: &faults{}, done: make(chan struct{})}
	cfg := clientConfig(t, kubeconfig, c.f)
	client, err := coordv1.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.run(func(ctx context.Context) {
		for ctx.Err() == nil {
			le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
				Lock: &resourcelock.LeaseLock{
					LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: leaseName},
					Client:     client,
					LockConfig: resourcelock.ResourceLockConfig{Identity: id},
				},
				LeaseDuration:   leaseDuration,
				RenewDeadline:   renewDeadline,
				RetryPeriod:     retryPeriod,
				ReleaseOnCancel: true,
				Name:            leaseName,
				Callbacks: leaderelection.LeaderCallbacks{
					OnStartedLeading: func(lctx context.Context) {
						j.started(id, c.kind, 0)
						<-lctx.Done()
						j.stopped(id)
					},
					OnStoppedLeading: func() {},
				},
			})
			if err != nil {
				panic(err)
			}
			le.Run(ctx)
		}
	})
	return c
}

// startTenure runs a tenure elector on store/k8s with the same lease
// duration; its task runs until its leader context ends.
func startTenure(t *testing.T, j *journal, kubeconfig, id string) *candidate {
	c := &candidate{id: id, kind: "tenure", f: &faults{}, done: make(chan struct{})}
	st, err := k8s.NewForConfig(clientConfig(t, kubeconfig, c.f), "default", "")
	if err != nil {
		t.Fatal(err)
	}
	e, err := tenure.New(tenure.Config{
		Store: st, Key: leaseName, Identity: id, TTL: leaseDuration,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	c.run(func(ctx context.Context) {
		defer st.Close()
		_ = e.Run(ctx, func(lctx context.Context) error {
			l, _ := tenure.LeaseFrom(lctx)
			j.started(id, c.kind, l.Term)
			<-lctx.Done()
			j.stopped(id)
			return nil
		})
	})
	return c
}

// TestMixedFleet: two client-go and two tenure candidates contend for one
// Lease on a real API server. Round after round the leader is released
// gracefully, killed, or frozen (its requests and watch hang for longer
// than the lease duration, then resume); a released or killed pod comes
// back under a new name, as a Deployment's would. Judged from the
// candidates' own logs, no two may ever lead at once, tenure's terms must
// grow, and each kind must have led at least three times.
func TestMixedFleet(t *testing.T) {
	srv := testserver.Kube(t)
	f := &fleet{t: t, j: newJournal(), kc: srv.Kubeconfig(t, srv.AdminToken), cands: map[string]*candidate{}}
	for _, kind := range []string{"client-go", "tenure", "client-go", "tenure"} {
		f.add(kind)
	}
	defer f.stopAll()
	// Each round, the candidates of the kind that is not to lead next
	// are held off (their requests hang, as over hung connections) until
	// a new leader is in, so leadership passes between the kinds in every
	// direction: client-go to tenure, tenure to client-go, and within a
	// kind.
	actions := []string{"release", "kill", "freeze"}
	kinds := []string{"client-go", "tenure"}
	const rounds = 12
	for round := range rounds {
		f.round(round, actions[round%len(actions)], kinds[round%len(kinds)])
	}
	f.waitLeader(rounds)
	f.stopAll()
	judge(t, f.j)
}

// fleet is the mixed fleet of one test: the candidates alive now, by ID.
type fleet struct {
	t           *testing.T
	j           *journal
	kc          string
	cands       map[string]*candidate
	incarnation int
}

// add starts a candidate of kind under a new name, as a Deployment would.
func (f *fleet) add(kind string) *candidate {
	f.incarnation++
	var c *candidate
	if kind == "client-go" {
		c = startClientGo(f.t, f.j, f.kc, fmt.Sprintf("cg-%d", f.incarnation))
	} else {
		c = startTenure(f.t, f.j, f.kc, fmt.Sprintf("tn-%d", f.incarnation))
	}
	f.cands[c.id] = c
	return c
}

// stopAll thaws and stops every candidate and waits for them.
func (f *fleet) stopAll() {
	for id, c := range f.cands {
		c.f.unfreeze()
		c.cancel()
		<-c.done
		delete(f.cands, id)
	}
}

// waitLeader waits for exactly one leader and returns it.
func (f *fleet) waitLeader(round int) *candidate {
	limit := 3*leaseDuration + 10*time.Second
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		if ls := f.j.leading(); len(ls) == 1 {
			if c := f.cands[ls[0]]; c != nil {
				return c
			}
		}
		select {
		case <-f.j.notify:
		case <-deadline.C:
			f.t.Fatalf("round %d: no single leader within %s (leading: %v)", round, limit, f.j.leading())
		}
	}
}

// round does action to the leader while the candidates not of kind target
// are held off, and waits for another leader.
func (f *fleet) round(round int, action, target string) {
	c := f.waitLeader(round)
	var held []*candidate
	hold := func(o *candidate) {
		if o != c && o.kind != target {
			o.f.freeze()
			held = append(held, o)
		}
	}
	for _, o := range f.cands {
		hold(o)
	}
	// Let the others see the leader's grant and renewals first.
	time.Sleep(leaseDuration / 4)
	f.t.Logf("%6s round %d: %s the leader %s (%s); next leader: %s", f.j.now().Round(time.Millisecond), round, action, c.id, c.kind, target)
	switch action {
	case "release", "kill":
		if action == "kill" {
			c.f.kill()
			f.j.stopped(c.id)
		}
		c.cancel()
		<-c.done
		delete(f.cands, c.id)
		hold(f.add(c.kind))
	case "freeze":
		c.f.freeze()
		// Hung for longer than the lease: someone else takes over
		// while it is frozen; then it comes back.
		time.Sleep(leaseDuration + 3*time.Second)
		c.f.unfreeze()
	}
	if next := f.waitLeader(round); next == c {
		f.t.Fatalf("round %d: %s still leads after %s", round, c.id, action)
	}
	for _, o := range held {
		o.f.unfreeze()
	}
}

// judge checks the run from the candidates' own logs: no two leaders at
// any instant, tenure's terms growing, and both kinds leading.
func judge(t *testing.T, j *journal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	runEnd := j.now()
	var all, ten []history.Interval
	led := map[string]int{}
	for key, iv := range j.ivs {
		all = append(all, *iv)
		led[j.kind[key]]++
		if j.kind[key] == "tenure" {
			ten = append(ten, *iv)
		}
	}
	for _, iv := range history.Sorted(all) {
		t.Logf("%-6s term %-3d led %8s .. %8s", iv.ID, iv.Term, iv.Start.Round(time.Millisecond), iv.EndOr(runEnd).Round(time.Millisecond))
	}
	var bad []string
	for _, v := range history.Check(all, runEnd, nil) {
		if v.Rule == history.RuleOverlap {
			bad = append(bad, v.String())
		}
	}
	for _, v := range history.Check(ten, runEnd, nil) {
		if v.Rule == history.RuleTerms {
			bad = append(bad, v.String())
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d violations:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	if led["client-go"] < 3 || led["tenure"] < 3 {
		t.Fatalf("leaderships by kind: %v; the run did not mix the two", led)
	}
	t.Logf("%d leaderships (%v), no two leaders at once; max overlap %s", len(all), led, history.MaxOverlap(all, runEnd))
}
