package raft

import (
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	hraft "github.com/hashicorp/raft"
)

// valueFSM is the node's state machine. The log carries, besides raft's
// own entries, one command per grant that publishes a value: the value
// itself, committed in the raft term of the grant. A member reports the
// value while that term is current (see [Node.Get]), so a new term (a new
// leader, or the same one after a release) shows none until its holder
// publishes again.
type valueFSM struct {
	mu     sync.Mutex
	term   uint64 // the raft term of value's entry
	value  string
	wakers map[chan<- struct{}]struct{} // watches to wake on every apply
}

// Apply implements [hraft.FSM]: it records the value of a command entry,
// unless a later term's is already known.
func (f *valueFSM) Apply(l *hraft.Log) any {
	if l.Type != hraft.LogCommand || !utf8.Valid(l.Data) {
		return nil
	}
	f.mu.Lock()
	if l.Term >= f.term {
		f.term, f.value = l.Term, string(l.Data)
	}
	for w := range f.wakers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	f.mu.Unlock()
	return nil
}

// published returns the value published in term, "" if none.
func (f *valueFSM) published(term uint64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.term != term {
		return ""
	}
	return f.value
}

// wakeOn makes every apply wake w (non-blocking) until the returned
// function is called.
func (f *valueFSM) wakeOn(w chan<- struct{}) (stop func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.wakers == nil {
		f.wakers = map[chan<- struct{}]struct{}{}
	}
	f.wakers[w] = struct{}{}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.wakers, w)
	}
}

// Snapshot implements [hraft.FSM]: the current value and its term, as
// JSON, so a member that restores it still reports the value while the
// term lasts.
func (f *valueFSM) Snapshot() (hraft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return valueSnapshot{Term: f.term, Value: f.value}, nil
}

// Restore implements [hraft.FSM]. An empty snapshot (taken before values
// were published) restores no value.
func (f *valueFSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxSnapshot))
	if err != nil {
		return err
	}
	var s valueSnapshot
	if len(b) > 0 {
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("raft: restore the published value: %w", err)
		}
	}
	f.mu.Lock()
	f.term, f.value = s.Term, s.Value
	f.mu.Unlock()
	return nil
}

// maxSnapshot bounds what Restore reads: a term and a value of at most
// tenure.MaxValueLen bytes, JSON-escaped.
const maxSnapshot = 64 << 10

// valueSnapshot is the FSM's snapshot.
type valueSnapshot struct {
	Term  uint64 `json:"term"`
	Value string `json:"value"`
}

// Persist implements [hraft.FSMSnapshot].
func (s valueSnapshot) Persist(sink hraft.SnapshotSink) error {
	b, _ := json.Marshal(s) // a uint64 and a string always marshal
	if _, err := sink.Write(b); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements [hraft.FSMSnapshot].
func (valueSnapshot) Release() {}
