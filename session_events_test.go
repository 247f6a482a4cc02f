package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/store/memory"
)

// leaderships records the elected, lost and released events
// SessionConfig.OnEvent receives.
type leaderships struct {
	mu  sync.Mutex
	got []string
}

func (r *leaderships) on(ev tenure.Event) {
	switch ev.Kind {
	case tenure.EventElected, tenure.EventLost, tenure.EventReleased:
	default:
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprintf("%s %s term %d", ev.Key, ev.Kind, ev.Term)
	switch {
	case errors.Is(ev.Err, tenure.ErrLost):
		s += " (ErrLost)"
	case errors.Is(ev.Err, tenure.ErrClosed):
		s += " (ErrClosed)"
	case ev.Err != nil:
		s += " (" + ev.Err.Error() + ")"
	}
	r.got = append(r.got, s)
}

func (r *leaderships) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	slices.Sort(got)
	return got
}

// TestCampaignReportsLeadershipEvents: a key led through Session.Campaign
// is reported, and logged, when it is elected, when the store ends its
// grant (lost), when it is resigned and when the session closes
// (released), as an elector's leadership is: before, a process leading
// thousands of keys this way logged nothing of any of them.
func TestCampaignReportsLeadershipEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		var seen leaderships
		var logs syncbuf.Buffer
		s, err := tenure.NewSession(tenure.SessionConfig{Store: mem, TTL: ttl, OnEvent: seen.on,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ls := campaignAll(t, s, 3)
		want := []string{"k0 elected term 1", "k1 elected term 1", "k2 elected term 1"}
		if got := seen.take(); !slices.Equal(got, want) {
			t.Fatalf("after Campaign: %q, want %q", got, want)
		}

		if err := mem.Release(context.Background(), ls[1].Lease()); err != nil { // from outside
			t.Fatal(err)
		}
		<-ls[1].Done()
		ls[0].Resign(context.Background())
		synctest.Wait()
		want = []string{"k0 released term 1", "k1 lost term 1 (ErrLost)"}
		if got := seen.take(); !slices.Equal(got, want) {
			t.Fatalf("after k1's grant ended and k0's Resign: %q, want %q", got, want)
		}
		ls[1].Resign(context.Background()) // after its loss: nothing more to report

		ctx, cancel := context.WithCancel(context.Background())
		cancel() // Close ends k2's leadership, then waits for its Resign
		_ = s.Close(ctx)
		synctest.Wait()
		want = []string{"k2 released term 1 (ErrClosed)"}
		if got := seen.take(); !slices.Equal(got, want) {
			t.Fatalf("after Close: %q, want %q", got, want)
		}
		ls[2].Resign(context.Background())
		mustClose(t, s)
		for _, line := range []string{`msg="tenure: elected" key=k0`, `msg="tenure: leadership lost" key=k1`, `msg="tenure: leadership released" key=k0`} {
			if !strings.Contains(logs.String(), line) {
				t.Errorf("no log line with %s in:\n%s", line, logs.String())
			}
		}
		if got := seen.take(); len(got) != 0 {
			t.Errorf("after every Resign and Close: %q, want nothing more", got)
		}
	})
}

// TestBlockingCampaignOnEventEndsEveryLeadership: an OnEvent that blocks
// on a loss report does not keep the session from ending its other
// leaderships: the session reports each end from a goroutine of its own.
func TestBlockingCampaignOnEventEndsEveryLeadership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memory.New(nil)
		unblock := make(chan struct{})
		on := func(ev tenure.Event) {
			if ev.Kind == tenure.EventReleased || ev.Kind == tenure.EventLost {
				<-unblock
			}
		}
		s, err := tenure.NewSession(tenure.SessionConfig{Store: mem, TTL: ttl, OnEvent: on, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ls := campaignAll(t, s, 3)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = s.Close(ctx) // ends the three leaderships with ErrClosed
		synctest.Wait()
		for i, l := range ls {
			if l.Context().Err() == nil {
				t.Errorf("k%d still leads after Close, while OnEvent blocks on another's end", i)
			}
		}
		close(unblock)
		resignAll(ls)
		mustClose(t, s)
	})
}
