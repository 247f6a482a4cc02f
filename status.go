package tenure

import "time"

// Status is a snapshot of an elector, for metrics, logs and health checks.
type Status struct {
	Key      string
	Identity string
	// Leading reports whether this candidate leads now (its task is running
	// with a live leader context).
	Leading bool
	// Term is this candidate's current term while Leading, else its last one.
	Term uint64
	// Holder and HolderTerm are the holder last seen while campaigning.
	Holder     string
	HolderTerm uint64
	// Since is when the current term began.
	Since time.Time
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

// The elector changes its status only through the methods below, each at
// one point of a term's life.

// sawHolder records the holder a campaigning candidate saw, and reports
// whether the holder changed.
func (e *Elector) sawHolder(r Record) (changed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	changed = r.Holder != e.status.Holder
	e.status.Holder, e.status.HolderTerm = r.Holder, r.Term
	return changed
}

func (e *Elector) beginTerm(l Lease, at, deadline time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := &e.status
	s.Leading, s.Term, s.Since = true, l.Term, at
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
	e.status.Leading = false
	e.status.Lost++
}

func (e *Elector) setError(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.LastError = err.Error()
}

// setOverrun records whether a cancelled task is running past
// [Config.StopTimeout].
func (e *Elector) setOverrun(on bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.status.TaskOverrun = on
}
