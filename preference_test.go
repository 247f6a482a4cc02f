package tenure_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// prefer sets p on the key "job" of store as "operator" until the
// returned func is called.
func prefer(t *testing.T, store tenure.Store, p tenure.Preference) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tenure.Prefer(ctx, store, "job", "operator", ttl, p) }()
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Prefer: %v", err)
		}
	}
}

// TestLeaderHandsOverToThePreferredHolderAfterTheDelay: a preference set
// on the key moves leadership to the named candidate once the leader has
// seen it registered for the delay, whatever the priorities, and it
// stays there; the old task ends before the new one starts.
func TestLeaderHandsOverToThePreferredHolderAfterTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		a := startCandidate(t, store, b, "a", 5)
		defer a.stop()
		if first := <-b.began; first.id != "a" {
			t.Fatalf("%s leads, want a", first.id)
		}
		bee := startCandidate(t, store, b, "b", 1)
		defer bee.stop()
		time.Sleep(2 * ttl) // b is registered, and a leads on
		const delay = 4 * ttl
		set := time.Now()
		defer prefer(t, store, tenure.Preference{Holder: "b", Delay: delay})()
		next := nextBegan(t, b, delay+10*ttl)
		if d := next.start.Sub(set); next.id != "b" || d < delay || d > delay+3*ttl {
			t.Fatalf("%s took over %s after the preference was set; want b after %s, within three TTLs of it", next.id, d, delay)
		}
		keepsLeading(t, store, "b", "the preferred b")
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.max > 1 {
			t.Fatalf("%d tasks ran at once", b.max)
		}
	})
}

// TestPreferenceOfAnAbsentOrNeverLeadingCandidateMovesNothing: the leader
// keeps leading while the preferred holder is not registered, or is a
// candidate of priority NeverLead.
func TestPreferenceOfAnAbsentOrNeverLeadingCandidateMovesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		a := startCandidate(t, store, b, "a", 1)
		defer a.stop()
		first := <-b.began
		standby := startCandidate(t, store, b, "standby", tenure.NeverLead)
		defer standby.stop()
		for _, holder := range []string{"ghost", "standby"} {
			stop := prefer(t, store, tenure.Preference{Holder: holder, Delay: ttl})
			time.Sleep(10 * ttl)
			synctest.Wait()
			stop()
			if r, _ := store.Get(context.Background(), "job"); r.Holder != "a" || r.Term != first.lease.Term {
				t.Fatalf("with %s preferred, the key is %+v; want a to lead on in term %d", holder, r, first.lease.Term)
			}
		}
	})
}

// TestPreferredHolderGoesFirstWhenTheKeyIsFree: when the leader leaves,
// the preferred holder takes the key although another candidate has a
// higher priority.
func TestPreferredHolderGoesFirstWhenTheKeyIsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		b := newBook()
		a := startCandidate(t, store, b, "a", 1)
		<-b.began
		defer prefer(t, store, tenure.Preference{Holder: "pref", Delay: time.Hour})()
		high := startCandidate(t, store, b, "high", 5)
		defer high.stop()
		pref := startCandidate(t, store, b, "pref", 1)
		defer pref.stop()
		time.Sleep(3 * ttl) // both registered and have read the preference
		a.stop()
		if next := nextBegan(t, b, 10*ttl); next.id != "pref" {
			t.Fatalf("%s took the free key; want the preferred holder", next.id)
		}
	})
}

func TestPreferErrors(t *testing.T) {
	store := memory.New(nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		key  string
		p    tenure.Preference
	}{
		{"no holder", "job", tenure.Preference{}},
		{"negative delay", "job", tenure.Preference{Holder: "b", Delay: -time.Second}},
		{"empty key", "", tenure.Preference{Holder: "b"}},
	} {
		if err := tenure.Prefer(ctx, store, tc.key, "op", ttl, tc.p); !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("%s: Prefer = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, ok, err := tenure.ReadPreference(ctx, store, "job"); ok || err != nil {
		t.Errorf("ReadPreference with none set = %v, %v; want none", ok, err)
	}
}

// nextBegan returns the next term b records, failing t if none begins
// within d (on the bubble's clock).
func nextBegan(t *testing.T, b *book, d time.Duration) *term {
	t.Helper()
	select {
	case tm := <-b.began:
		return tm
	case <-time.After(d):
		t.Fatalf("no new term within %s", d)
		return nil
	}
}

// TestPreferLogsThroughItsLogger: the preference's elector logs through
// Preference.Logger, with the preference key, and not through
// slog.Default (tenure prefer's --log-format and --quiet rest on it).
func TestPreferLogsThroughItsLogger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var def, own bytes.Buffer
		old := slog.Default()
		slog.SetDefault(slog.New(slog.NewTextHandler(&def, nil)))
		defer slog.SetDefault(old)
		store := memory.New(nil)
		stop := prefer(t, store, tenure.Preference{Holder: "b", Logger: slog.New(slog.NewJSONHandler(&own, nil))})
		time.Sleep(ttl)
		stop()
		synctest.Wait()
		if !strings.Contains(own.String(), `"key":"job~tenure-prefer"`) {
			t.Errorf("Preference.Logger got %q, want the elector's JSON lines with the preference key", own.String())
		}
		if strings.Contains(def.String(), "job~tenure-prefer") {
			t.Errorf("slog.Default got %q, want none of the preference's lines", def.String())
		}
		if p, ok, err := tenure.ReadPreference(context.Background(), store, "job"); err != nil || ok || p.Logger != nil {
			t.Errorf("after Prefer ended: ReadPreference = %+v, %v, %v; want none", p, ok, err)
		}
	})
}
