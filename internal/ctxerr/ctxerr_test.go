package ctxerr

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

func TestErr(t *testing.T) {
	if err := Err(context.Background()); err != nil {
		t.Fatalf("Err(Background) = %v", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Err(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("Err(cancelled) = %v, want Canceled", err)
	}
	// A deadline in the past whose timer cannot have fired: WithDeadline
	// in the past is done at once, so build one whose timer is far off and
	// look at it through a context that reports a past deadline.
	past := pastDeadline{Context: context.Background(), d: time.Now().Add(-time.Millisecond)}
	if err := Err(past); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Err(past deadline, timer not fired) = %v, want DeadlineExceeded", err)
	}
	future, cancel2 := context.WithTimeout(context.Background(), time.Hour)
	defer cancel2()
	if err := Err(future); err != nil {
		t.Fatalf("Err(deadline in an hour) = %v", err)
	}
}

// pastDeadline reports a deadline that has passed while its Err is still
// nil, as a context whose timer lags does.
type pastDeadline struct {
	context.Context
	d time.Time
}

func (p pastDeadline) Deadline() (time.Time, bool) { return p.d, true }

func TestUsableCallAndClaim(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name   string
		err    error
		target error
	}{
		{"open, live context", Usable(context.Background(), false), nil},
		{"open, cancelled context", Usable(done, false), context.Canceled},
		{"closed, live context", Usable(context.Background(), true), tenure.ErrClosed},
		{"closed wins over a cancelled context", Usable(done, true), tenure.ErrClosed},
		{"a good key", Call(context.Background(), false, "k"), nil},
		{"a bad key wins over closed", Call(done, true, ""), tenure.ErrInvalid},
		{"closed, good key", Call(done, true, "k"), tenure.ErrClosed},
		{"a good claim", Claim(context.Background(), false, "k", tenure.Claim{Identity: "a", TTL: time.Second}), nil},
		{"a bad claim wins over closed", Claim(done, true, "k", tenure.Claim{Identity: "a"}), tenure.ErrInvalid},
		{"closed, good claim", Claim(done, true, "k", tenure.Claim{Identity: "a", TTL: time.Second}), tenure.ErrClosed},
	} {
		if c.target == nil && c.err != nil || c.target != nil && !errors.Is(c.err, c.target) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.target)
		}
	}
}
