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
// within the last candidatesFresh (see readCandidates). The store's error
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

// candidatesFresh is how long one read of the candidate slots answers
// /candidates. The view has no authentication, and each read is
// [tenure.CandidateSlots] store requests from the candidate's own process,
// on the store its renewals need: however fast requests come, the view
// reads the slots at most once per candidatesFresh.
const candidatesFresh = time.Second

// candidateCache is the last read of the candidate slots.
type candidateCache struct {
	mu  sync.Mutex // held across a read: concurrent requests wait for it and share it
	at  time.Time  // when it was read; zero: never
	cs  []tenure.Candidate
	err error
}

// readCandidates returns the candidates of the key, read now or less than
// candidatesFresh ago, and the read's error. A request arriving during a
// read waits for it (at most readTimeout); the read is not cut short by
// the request that started it going away.
func (h *Handler) readCandidates(ctx context.Context) ([]tenure.Candidate, error) {
	c := &h.cands
	c.mu.Lock()
	defer c.mu.Unlock()
	if age := h.clock.Now().Sub(c.at); !c.at.IsZero() && age >= 0 && age < candidatesFresh {
		return c.cs, c.err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
	defer cancel()
	c.cs, c.err = tenure.Candidates(ctx, h.opts.Store, h.opts.Key)
	c.at = h.clock.Now()
	return c.cs, c.err
}
