package compare

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/faultstore"
)

// failoverResult is how long a crashed process's keys took to move.
type failoverResult struct {
	store   string
	lead    string // how process A leads: "Run" or "Campaign"
	n       int
	all     time.Duration // from the crash until the other process led every key
	first   time.Duration // from the crash until the other process led its first key
	overlap int           // keys whose new task started before the old one ended
}

// sessionProcess is one process leading keys through one session: its
// store handle sits behind faults that can freeze it, as a crash would.
type sessionProcess struct {
	st     tenure.Store
	faults *faultstore.Faults
	sess   *tenure.Session
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu            sync.Mutex
	started, done map[string]time.Time // per key: its task's start and end
	ledAll        chan struct{}
	all           bool // ledAll is closed
}

// startSessionProcess starts a process leading keys as id, each key with
// an elector's Run, or with Session.Campaign if campaign is set.
func startSessionProcess(ctx context.Context, url, id string, keys []string, campaign bool) (*sessionProcess, error) {
	st, err := tenure.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	f := faultstore.New(faultstore.Plan{})
	p := &sessionProcess{st: st, faults: f, started: map[string]time.Time{}, done: map[string]time.Time{}, ledAll: make(chan struct{})}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if p.sess, err = tenure.NewSession(tenure.SessionConfig{Store: faultstore.Wrap(st, f), TTL: scaleTTL, Logger: quiet}); err != nil {
		st.Close()
		return nil, err
	}
	runCtx, stop := context.WithCancel(ctx)
	p.stop = stop
	for _, k := range keys {
		if campaign {
			p.wg.Go(func() { p.campaign(runCtx, k, id, len(keys)) })
			continue
		}
		e, err := tenure.New(tenure.Config{Session: p.sess, Key: k, Identity: id, Logger: quiet})
		if err != nil {
			p.close()
			return nil, err
		}
		p.wg.Go(func() { _ = e.Run(runCtx, p.task(k, len(keys))) })
	}
	return p, nil
}

func (p *sessionProcess) task(key string, n int) tenure.Task {
	return func(ctx context.Context) error {
		p.mu.Lock()
		p.started[key] = time.Now()
		if len(p.started) == n && !p.all {
			p.all = true // a key led again (after a loss) counts once
			close(p.ledAll)
		}
		p.mu.Unlock()
		<-ctx.Done()
		p.mu.Lock()
		p.done[key] = time.Now()
		p.mu.Unlock()
		return nil
	}
}

// campaign leads key with Session.Campaign until ctx is done: the task
// runs until the leadership (or ctx) ends, then the key is resigned.
func (p *sessionProcess) campaign(ctx context.Context, key, id string, n int) {
	for {
		l, err := p.sess.Campaign(ctx, key, id, "")
		if err != nil {
			return
		}
		tctx, cancel := context.WithCancel(l.Context())
		stop := context.AfterFunc(ctx, cancel)
		_ = p.task(key, n)(tctx)
		stop()
		cancel()
		l.Resign(context.Background())
	}
}

func (p *sessionProcess) close() {
	p.stop()
	p.faults.Heal()
	p.wg.Wait()
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = p.sess.Close(cctx)
	cancel()
	p.st.Close()
}

// measureFailover has process A lead n keys while process B campaigns for
// them, then freezes A's connection (nothing released, nothing renewed)
// and times until B leads every key, checking that each of B's tasks
// started after A's task for that key ended.
func measureFailover(ctx context.Context, s scaleStore, n int, campaign bool) (failoverResult, error) {
	r := failoverResult{store: s.name, lead: "Run", n: n}
	if campaign {
		r.lead = "Campaign"
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("failover-%d-%d-%d", n, time.Now().UnixNano(), i)
	}
	a, err := startSessionProcess(ctx, s.url, "a", keys, campaign)
	if err != nil {
		return r, err
	}
	defer a.close()
	if err := waitAll(ctx, a.ledAll, nil, n, 3*time.Minute); err != nil {
		return r, err
	}
	b, err := startSessionProcess(ctx, s.url, "b", keys, false)
	if err != nil {
		return r, err
	}
	defer b.close()
	if err := pause(ctx, scaleTTL/2); err != nil { // b's candidates settle on their watches
		return r, err
	}
	crash := time.Now()
	a.faults.Partition(faultstore.Hang)
	if err := waitAll(ctx, b.ledAll, nil, n, 3*scaleTTL+time.Minute); err != nil {
		return r, err
	}
	r.all = time.Since(crash)
	a.mu.Lock()
	b.mu.Lock()
	r.first = r.all
	for _, k := range keys {
		r.first = min(r.first, b.started[k].Sub(crash))
		if end, ok := a.done[k]; !ok || b.started[k].Before(end) {
			r.overlap++
		}
	}
	b.mu.Unlock()
	a.mu.Unlock()
	return r, nil
}
