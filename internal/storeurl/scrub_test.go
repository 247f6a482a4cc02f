package storeurl

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Fail names the store, the call and the server, hides the password, and
// matches the context's error once ctx is done or past its deadline, even
// before the context's timer fired.
func TestFail(t *testing.T) {
	cause := errors.New("dial tcp: i/o timeout (password hunter2)")
	err := Fail(context.Background(), "tenure/redis", "redis://:xxxxx@h/0", "hunter2", "get", cause)
	if !errors.Is(err, cause) || err.Error() != "tenure/redis: get on redis://:xxxxx@h/0: dial tcp: i/o timeout (password xxxxx)" {
		t.Errorf("Fail with a live ctx = %q", err)
	}
	late, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	for ctx, want := range map[context.Context]error{late: context.DeadlineExceeded, cancelled: context.Canceled} {
		err := Fail(ctx, "tenure/redis", "h", "hunter2", "get", cause)
		if !errors.Is(err, want) || !errors.Is(err, cause) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Fail with ctx done = %v; want it to match %v and the cause, without the password", err, want)
		}
	}
	if err := Fail(cancelled, "tenure/redis", "h", "", "get", context.Canceled); err.Error() != "tenure/redis: get on h: context canceled" {
		t.Errorf("Fail of ctx's own error = %q; want it once", err)
	}
}

// TestFailKeepsWhatIsNotTheCredential: a password that is also a word of
// the message ("redis", the store's own name) is hidden only where it
// stands as the password; "tenure/xxxxx" would tell the reader what it is.
func TestFailKeepsWhatIsNotTheCredential(t *testing.T) {
	cause := errors.New("dial redis: refused; AUTH password=redis")
	err := Fail(context.Background(), "tenure/redis", "redis://:xxxxx@h/0", "redis", "get", cause)
	if want := "tenure/redis: get on redis://:xxxxx@h/0: dial redis: refused; AUTH password=xxxxx"; err.Error() != want {
		t.Errorf("Fail = %q\n want %q", err, want)
	}
}
