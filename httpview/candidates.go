package httpview

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
)

// CandidateJSON is one registered candidate as /candidates serves it.
type CandidateJSON struct {
	ID       string    `json:"id"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"` // on the candidate's own clock
	Leading  bool      `json:"leading"`
}

// candidatesJSON is the body of /candidates.
type candidatesJSON struct {
	Key        string          `json:"key"`
	Candidates []CandidateJSON `json:"candidates"`
	Error      string          `json:"error,omitempty"`
}

// serveCandidates serves the registered candidates, best first, as read
// within the last readFresh (see sharedRead). The store's error
// is not shown: it may name the store. A view of a derived
// key ([tenure.BaseKey]) shows that key's own record, but it has no
// candidates of its own: /candidates answers 400 naming the base key,
// without reading the store.
func (h *Handler) serveCandidates(w http.ResponseWriter, r *http.Request) {
	body := candidatesJSON{Key: h.opts.Key, Candidates: []CandidateJSON{}}
	if base, what, ok := tenure.BaseKey(h.opts.Key); ok {
		body.Error = fmt.Sprintf("key %q is %s of %q, not a lease with candidates: use key %q", h.opts.Key, what, base, base)
		writeJSON(w, http.StatusBadRequest, body)
		return
	}
	cs, err := h.readCandidates(r.Context())
	if err != nil {
		h.logger.Debug("httpview: cannot read the candidates", "key", h.opts.Key)
		body.Error = "cannot read the candidates of the key from the store (peer stores keep no registry)"
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	leader := h.Current().Name
	for _, c := range cs {
		body.Candidates = append(body.Candidates, CandidateJSON{ID: c.Identity, Priority: c.Priority,
			Since: c.Since, Leading: leader != "" && c.Identity == leader})
	}
	writeJSON(w, http.StatusOK, body)
}

// readFresh is how long one store read answers the requests that need it
// (/candidates, an observer's /healthz and /readyz). The view has no
// authentication, and its reads come from the candidate's or observer's
// own process, on the store (connections, quota) renewals need: however
// fast requests come, the view makes each read at most once per
// readFresh.
const readFresh = time.Second

// sharedRead is the last result of one kind of store read, shared by the
// requests that come within readFresh of it.
type sharedRead[T any] struct {
	mu  sync.Mutex // held across a read: concurrent requests wait for it and share it
	at  time.Time  // when it was read; zero: never
	v   T
	err error
}

// get returns the result of read, made now or less than readFresh ago by
// clock. A request arriving during a read waits for it (at most
// readTimeout); the read is not cut short by the request that started it
// going away.
func (s *sharedRead[T]) get(ctx context.Context, clock tenure.Clock, read func(context.Context) (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if age := clock.Now().Sub(s.at); !s.at.IsZero() && age >= 0 && age < readFresh {
		return s.v, s.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	s.v, s.err = read(ctx)
	s.at = clock.Now()
	return s.v, s.err
}

// readCandidates returns the candidates of the key (see sharedRead).
func (h *Handler) readCandidates(ctx context.Context) ([]tenure.Candidate, error) {
	return h.cands.get(ctx, h.clock, func(ctx context.Context) ([]tenure.Candidate, error) {
		return tenure.Candidates(ctx, h.opts.Store, h.opts.Key)
	})
}
