package tenure

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Status is a snapshot of an elector, for metrics, logs and health checks.
type Status struct {
	Key      string
	Identity string
	// Leader reports whether this candidate leads now (its task is running
	// with a live leader context).
	Leader bool
	// Term is this candidate's current term while Leader, else its last one.
	Term uint64
	// Holder and HolderTerm are the holder last seen while campaigning.
	Holder     string
	HolderTerm uint64
	// LeaderSince is when the current term began.
	LeaderSince time.Time
	// LastRenew is when the last successful renewal (or the acquisition)
	// was sent; Deadline is when the leader context will be cancelled unless
	// another renewal succeeds.
	LastRenew time.Time
	Deadline  time.Time
	// RenewLatency is the round trip of the last successful renewal.
	RenewLatency time.Duration
	// Elected and Lost count terms begun and ended.
	Elected, Lost uint64
	// TaskOverrun reports a task still running longer than
	// [Config.StopTimeout] after its context was cancelled.
	TaskOverrun bool
	// LastError is the last store error seen, if any.
	LastError string
}

// Status returns a snapshot of the elector. It never blocks on the store.
func (e *Elector) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.status
}

// Healthy returns nil if the elector is healthy, else an error saying why:
// a leader whose renewals are overdue, or a task that overran its context's
// cancellation. A task that stalls (see [Config.StallTimeout]) loses
// leadership at once; if it then does not return, it overruns. A follower
// is healthy.
func (e *Elector) Healthy() error {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.status
	if s.TaskOverrun {
		return fmt.Errorf("tenure: leader task of term %d still runs after its context was cancelled", s.Term)
	}
	if !s.Leader {
		return nil
	}
	if overdue := now.Sub(s.LastRenew) - e.renewGap(); overdue > 0 {
		return fmt.Errorf("tenure: leader of term %d has not renewed for %s", s.Term, now.Sub(s.LastRenew).Round(time.Millisecond))
	}
	return nil
}

// renewGap is the longest normal time between two renewal starts.
func (e *Elector) renewGap() time.Duration {
	return time.Duration(float64(e.cfg.RenewInterval)*e.cfg.Jitter) + e.cfg.RequestTimeout
}

// HealthHandler returns an [http.Handler] for liveness and readiness probes:
// 200 with a JSON status while [Elector.Healthy] returns nil, 503 with the
// reason otherwise.
func (e *Elector) HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s := e.Status()
		body := struct {
			OK       bool   `json:"ok"`
			Error    string `json:"error,omitempty"`
			Key      string `json:"key"`
			Identity string `json:"identity"`
			Leader   bool   `json:"leader"`
			Term     uint64 `json:"term,omitempty"`
		}{OK: true, Key: s.Key, Identity: s.Identity, Leader: s.Leader, Term: s.Term}
		code := http.StatusOK
		if err := e.Healthy(); err != nil {
			body.OK, body.Error, code = false, err.Error(), http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

func (e *Elector) beginTerm(l Lease, at, deadline time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.status
	s.Leader, s.Term, s.LeaderSince = true, l.Term, at
	s.LastRenew, s.Deadline = at, deadline
	s.Holder, s.HolderTerm = l.Identity, l.Term
	s.Elected++
	s.LastError = ""
}

func (e *Elector) renewed(sent, now, deadline time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.LastRenew, e.status.Deadline, e.status.RenewLatency = sent, deadline, now.Sub(sent)
}

func (e *Elector) endTerm() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.Leader = false
	e.status.Lost++
}

func (e *Elector) setError(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.LastError = err.Error()
}
