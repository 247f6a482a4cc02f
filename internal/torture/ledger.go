package torture

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Write is one attempt to write to a [Ledger].
type Write struct {
	At       time.Duration // since the run began
	ID       string        // the writer's candidate identity
	Term     uint64        // the fencing term the writer presented
	Accepted bool
}

// Ledger is the fenced resource of a torture run: an append-only log that
// accepts a write only if its term is at least the highest term it has seen,
// as a storage system protected by fencing tokens would. It records every
// attempt, accepted or not. Safe for concurrent use.
type Ledger struct {
	start time.Time

	mu      sync.Mutex
	highest uint64
	writes  []Write
}

// NewLedger returns an empty ledger whose timestamps count from start.
func NewLedger(start time.Time) *Ledger { return &Ledger{start: start} }

// Append presents a write of id with term and reports whether the ledger
// accepted it.
func (l *Ledger) Append(id string, term uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := term >= l.highest
	if ok {
		l.highest = term
	}
	l.writes = append(l.writes, Write{At: time.Since(l.start), ID: id, Term: term, Accepted: ok})
	return ok
}

// Writes returns a copy of every write presented so far, in order.
func (l *Ledger) Writes() []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Write(nil), l.writes...)
}

// ServeHTTP serves POST /append?id=ID&term=N for candidate processes: 204
// when accepted, 409 when fenced off, 400 for a malformed request.
func (l *Ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	term, err := strconv.ParseUint(r.URL.Query().Get("term"), 10, 64)
	if r.Method != http.MethodPost || id == "" || err != nil {
		http.Error(w, fmt.Sprintf("want POST /append?id=ID&term=N, got %s %s", r.Method, r.URL.RequestURI()), http.StatusBadRequest)
		return
	}
	if l.Append(id, term) {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Error(w, "stale term", http.StatusConflict)
}
