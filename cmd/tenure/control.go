package main

import (
	"context"
	"encoding/binary"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

// The control pipe carries deadline messages from `tenure run` to its
// supervisor: two little-endian int64 instants on CLOCK_MONOTONIC, in
// nanoseconds, at which the supervisor must SIGTERM the process group (the
// leader context's cancellation) and SIGKILL it (cancellation plus grace).
// CLOCK_MONOTONIC is shared by every process of the machine and keeps
// counting while a process is stopped, so a frozen tenure cannot stretch
// them. End of file on the pipe means tenure is gone.
const deadlineMsgLen = 16

type deadlineMsg struct{ termAt, killAt int64 }

func (m deadlineMsg) encode() []byte {
	b := make([]byte, deadlineMsgLen)
	binary.LittleEndian.PutUint64(b[0:], uint64(m.termAt))
	binary.LittleEndian.PutUint64(b[8:], uint64(m.killAt))
	return b
}

// readDeadline reads one message; io.EOF means the writer is gone.
func readDeadline(r io.Reader) (deadlineMsg, error) {
	var b [deadlineMsgLen]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return deadlineMsg{}, err
	}
	return deadlineMsg{
		termAt: int64(binary.LittleEndian.Uint64(b[0:])),
		killAt: int64(binary.LittleEndian.Uint64(b[8:])),
	}, nil
}

// monoNow returns CLOCK_MONOTONIC in nanoseconds.
func monoNow() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic("tenure: CLOCK_MONOTONIC unavailable: " + err.Error())
	}
	return ts.Nano()
}

// monoAt converts t, a time carrying Go's monotonic reading, to a
// CLOCK_MONOTONIC instant (Go's monotonic clock is CLOCK_MONOTONIC on Linux,
// so only the read-out offset matters).
func monoAt(t time.Time) int64 { return monoNow() + int64(time.Until(t)) }

// monoUntil is how long until the CLOCK_MONOTONIC instant at.
func monoUntil(at int64) time.Duration { return time.Duration(at - monoNow()) }

// deadlineFeed sends the supervisor of one term the deadlines it enforces.
// Deadlines only move forward: each is the time a successful renewal (or
// the acquisition) was sent plus the renew deadline, a moment the store
// cannot reach before the lease can lapse. Safe for concurrent use.
type deadlineFeed struct {
	renewDeadline, grace time.Duration

	mu     sync.Mutex
	w      *os.File
	latest time.Time
}

// advance moves the leader deadline to at (no-op if not later) and tells
// the supervisor. Errors (the supervisor is gone) are ignored: its end is
// noticed by waiting for it.
func (f *deadlineFeed) advance(at time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w == nil || !at.After(f.latest) {
		return
	}
	f.latest = at
	_, _ = f.w.Write(deadlineMsg{termAt: monoAt(at), killAt: monoAt(at.Add(f.grace))}.encode())
}

// renewed is the hook called after each successful renewal sent at sent.
func (f *deadlineFeed) renewed(sent time.Time) { f.advance(sent.Add(f.renewDeadline)) }

// close closes the pipe's write end, which the supervisor sees as EOF.
func (f *deadlineFeed) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.w != nil {
		f.w.Close()
		f.w = nil
	}
}

// hookedStore is a store whose successful renewals are reported to onRenew
// with the time each was sent, so the supervisor's deadlines follow the
// elector's. It forwards everything else unchanged.
type hookedStore struct {
	tenure.Store
	onRenew func(sent time.Time)
}

func (s *hookedStore) Renew(ctx context.Context, l tenure.Lease) error {
	sent := time.Now()
	err := s.Store.Renew(ctx, l)
	if err == nil {
		s.onRenew(sent)
	}
	return err
}

// hookedWatchStore is a hookedStore over a store that can watch, so the
// elector still finds the tenure.Watcher ability.
type hookedWatchStore struct {
	*hookedStore
	w tenure.Watcher
}

func (s hookedWatchStore) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	return s.w.Watch(ctx, key)
}

// hookRenewals wraps s so that onRenew sees every successful renewal.
func hookRenewals(s tenure.Store, onRenew func(sent time.Time)) tenure.Store {
	h := &hookedStore{Store: s, onRenew: onRenew}
	if w, ok := s.(tenure.Watcher); ok {
		return hookedWatchStore{h, w}
	}
	return h
}
