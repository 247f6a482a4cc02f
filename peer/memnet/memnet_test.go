package memnet_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure/peer/memnet"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// fate sends k messages from 1 to 2 under f and returns which sequence
// numbers arrived, in arrival order, once everything in flight landed.
func fate(t *testing.T, seed uint64, f memnet.Faults, k int) ([]uint64, memnet.Stats) {
	var got []uint64
	var st memnet.Stats
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New(seed)
		n.SetFaults(f)
		a, b := n.Join(1), n.Join(2)
		for range k {
			if err := a.Send(wire.Message{Type: wire.Heartbeat, To: 2}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(f.MaxDelay + time.Millisecond)
		synctest.Wait()
		for len(b.Recv()) > 0 {
			got = append(got, (<-b.Recv()).Seq)
		}
		st = n.Stats()
		a.Close()
		b.Close()
	})
	return got, st
}

func TestFaultsAreSeededAndCounted(t *testing.T) {
	f := memnet.Faults{Drop: 0.2, Duplicate: 0.2, MaxDelay: 50 * time.Millisecond}
	got, st := fate(t, 7, f, 500)
	again, _ := fate(t, 7, f, 500)
	if len(got) != len(again) {
		t.Fatalf("the same seed delivered %d then %d messages", len(got), len(again))
	}
	for i := range got {
		if got[i] != again[i] {
			t.Fatalf("the same seed delivered in a different order at %d", i)
		}
	}
	reordered := false
	for i := 1; i < len(got); i++ {
		reordered = reordered || got[i] < got[i-1]
	}
	if st.Sent[wire.Heartbeat] != 500 || st.Dropped == 0 || st.Duplicated == 0 || !reordered ||
		st.Delivered != uint64(len(got)) || st.Delivered != 500-st.Dropped+st.Duplicated {
		t.Fatalf("stats %+v, %d delivered, reordered=%t", st, len(got), reordered)
	}
}

func TestPartitionAndUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New(1)
		a, b, c := n.Join(1), n.Join(2), n.Join(3)
		n.Partition([]uint64{1}, []uint64{2, 3})
		a.Send(wire.Message{Type: wire.Election, To: 2})
		b.Send(wire.Message{Type: wire.Election, To: 3})
		time.Sleep(time.Millisecond) // past the sub-microsecond delivery jitter
		synctest.Wait()
		if len(b.Recv()) != 0 || len(c.Recv()) != 1 {
			t.Fatalf("partition leaked: %d at 2, %d at 3", len(b.Recv()), len(c.Recv()))
		}
		n.Heal()
		c.Close()
		if err := a.Send(wire.Message{Type: wire.Election, To: 3}); !errors.Is(err, transport.ErrUnreachable) {
			t.Fatalf("send to a closed endpoint = %v, want ErrUnreachable", err)
		}
		a.Send(wire.Message{Type: wire.Election, To: 2})
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if m := <-b.Recv(); m.From != 1 {
			t.Fatalf("got %v", m)
		}
		if st := n.Stats(); st.Dropped != 1 || st.Failed[wire.Election] != 1 || st.Unreachable != 1 {
			t.Fatalf("stats %+v", st)
		}
		c = n.Join(3) // a restarted member gets a new endpoint
		a.Close()
		b.Close()
		c.Close()
	})
}
