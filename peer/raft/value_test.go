package raft

import (
	"bytes"
	"context"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
)

// awaitValue waits, on n's watch, for a record of term with value.
func awaitValue(t *testing.T, n *Node, term uint64, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*testHB)
	defer cancel()
	ch, err := n.Watch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	for r := range ch {
		if r.Term == term && r.Value == value {
			return
		}
	}
	r, _ := n.Get(context.Background(), "k")
	t.Fatalf("member %s never reported value %q in term %d; it reports %+v", n.cfg.ID, value, term, r)
}

// A value published with a grant is committed to the log: every member
// reports it for the grant's term, and none once a new term begins.
func TestPublishedValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, testHB)
		li := awaitLeader(t, c, 20*testHB)
		ctx := context.Background()
		if _, err := c.node(li).AcquireClaim(ctx, "k", tenure.Claim{Identity: c.ids[li], TTL: testHB, Value: "10.0.0.7:\xff"}); err == nil {
			t.Fatal("AcquireClaim with an invalid value succeeded")
		}
		l, err := c.node(li).AcquireClaim(ctx, "k", tenure.Claim{Identity: c.ids[li], TTL: testHB, Value: "10.0.0.7:8080"})
		if err != nil {
			t.Fatalf("AcquireClaim: %v", err)
		}
		if l.Value != "10.0.0.7:8080" {
			t.Fatalf("lease %+v, want Value 10.0.0.7:8080", l)
		}
		for i := range c.ids {
			awaitValue(t, c.node(i), l.Term, "10.0.0.7:8080")
		}
		if err := c.node(li).Release(ctx, l); err != nil {
			t.Fatalf("Release: %v", err)
		}
		ni := awaitLeader(t, c, 20*testHB, li)
		term := c.node(ni).Raft().CurrentTerm()
		for i := range c.ids {
			awaitValue(t, c.node(i), term, "") // the new term has none yet
		}
		l2, err := c.node(ni).Acquire(ctx, "k", c.ids[ni], testHB)
		if err != nil {
			t.Fatalf("new leader Acquire: %v", err)
		}
		time.Sleep(5 * testHB) // a plain Acquire publishes nothing
		for i := range c.ids {
			if r, _ := c.node(i).Get(ctx, "k"); r.Term == l2.Term && r.Value != "" {
				t.Errorf("member %d reports %+v after a plain Acquire, want no value", i, r)
			}
		}
	})
}

// The FSM's snapshot keeps the value and its term; an empty snapshot
// (from before values) restores none.
func TestValueSnapshot(t *testing.T) {
	var f valueFSM
	f.term, f.value = 7, "v"
	s, _ := f.Snapshot()
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	var g valueFSM
	if err := g.Restore(sink.reader()); err != nil || g.published(7) != "v" {
		t.Fatalf("restored %+v, %v; want term 7 value v", g.value, err)
	}
	if err := g.Restore((&memSink{}).reader()); err != nil || g.published(7) != "" {
		t.Fatalf("after an empty snapshot: %q, %v; want no value", g.published(7), err)
	}
}

// memSink is a snapshot sink in memory.
type memSink struct{ bytes.Buffer }

func (*memSink) ID() string    { return "mem" }
func (*memSink) Cancel() error { return nil }
func (*memSink) Close() error  { return nil }
func (s *memSink) reader() io.ReadCloser {
	return io.NopCloser(bytes.NewReader(s.Bytes()))
}
