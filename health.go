package tenure

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

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
	if !s.Leading {
		return nil
	}
	if overdue := now.Sub(s.LastRenew) - e.renewGap(); overdue > 0 {
		return fmt.Errorf("tenure: leader of term %d has not renewed for %s", s.Term, now.Sub(s.LastRenew).Round(time.Millisecond))
	}
	return nil
}

// renewGap is the longest normal time between two renewal starts.
func (e *Elector) renewGap() time.Duration {
	return e.cfg.longestRenewInterval() + e.cfg.RequestTimeout
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
		}{OK: true, Key: s.Key, Identity: s.Identity, Leader: s.Leading, Term: s.Term}
		code := http.StatusOK
		if err := e.Healthy(); err != nil {
			body.OK, body.Error, code = false, err.Error(), http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(body)
	})
}
