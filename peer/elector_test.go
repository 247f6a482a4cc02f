package peer_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

type started struct {
	id   string
	term uint64
}

// TestElectorOnTCP runs tenure electors on a 3-member Bully group over TCP
// loopback: exactly one task leads, with the coordinator epoch as its term;
// when the leading process goes away, another is elected with a higher term.
func TestElectorOnTCP(t *testing.T) {
	g := newTCPGroup(t, "bully", 3)
	var running, overlaps atomic.Int32
	starts := make(chan started, 16)
	task := func(ctx context.Context) error {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		l, _ := tenure.LeaseFrom(ctx)
		starts <- started{l.Identity, l.Term}
		<-ctx.Done()
		return nil
	}
	type member struct {
		node   interface{ Close() error }
		el     *tenure.Elector
		cancel context.CancelFunc
		done   chan error
	}
	members := map[string]*member{}
	var wg sync.WaitGroup
	for id := uint64(1); id <= 3; id++ {
		n := g.start(id)
		el, err := tenure.New(tenure.Config{Store: n, Key: "job", Identity: n.Identity(), TTL: 1500 * time.Millisecond,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		m := &member{node: n, el: el, cancel: cancel, done: make(chan error, 1)}
		members[n.Identity()] = m
		wg.Go(func() { m.done <- el.Run(ctx, task) })
	}
	defer func() {
		for _, m := range members {
			m.cancel()
		}
		wg.Wait()
	}()

	first := awaitStart(t, starts)
	if first.id != "3" {
		t.Fatalf("task leader is %s; bully elects the highest ID, 3", first.id)
	}
	if _, epoch := g.awaitLeader(3, 5*time.Second); epoch != first.term {
		t.Fatalf("the task's term %d is not the coordinator epoch %d", first.term, epoch)
	}
	// Every elector sees member 3 as the holder, and only it leads.
	for id, m := range members {
		s := m.el.Status()
		if s.Leading != (id == "3") {
			t.Fatalf("elector %s: Leading=%t", id, s.Leading)
		}
	}

	// The leading process dies: its elector stops, its node leaves.
	m3 := members["3"]
	m3.cancel()
	<-m3.done
	m3.node.Close()
	g.nodes[3] = nil
	delete(members, "3")

	second := awaitStart(t, starts)
	if second.id != "2" || second.term <= first.term {
		t.Fatalf("after member 3 left, %s leads with term %d; want member 2 with a term above %d", second.id, second.term, first.term)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d times two tasks ran at once", n)
	}
}

// awaitStart returns the next task start on starts, failing t after 10s.
func awaitStart(t *testing.T, starts <-chan started) started {
	t.Helper()
	return receive(t, starts, "no task started")
}

// receive returns the next value on ch, failing t with "none" after 10s.
func receive[T any](t *testing.T, ch <-chan T, none string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal(none + " within 10s")
	}
	var zero T
	return zero
}
