package httpview

import (
	"context"
	"fmt"
	"net/http"
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

// serveCandidates serves the registered candidates, best first. The
// store's error is not shown: it may name the store. A view of a derived
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
	ctx, cancel := context.WithTimeout(r.Context(), readTimeout)
	defer cancel()
	cs, err := tenure.Candidates(ctx, h.opts.Store, h.opts.Key)
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
