package ctxwait

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep(1ms) with a live context = false, want true")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep(1h) with a cancelled context = true, want false")
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("Sleep(1h) with a cancelled context did not return at once")
	}
}

func TestCancelOnClose(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	CancelOnClose(ctx, done, cancel)
	close(done)
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("closing done did not cancel the context")
	}
	// With ctx done first, done is never waited on.
	ctx2, cancel2 := context.WithCancel(context.Background())
	CancelOnClose(ctx2, make(chan struct{}), func() { t.Error("cancel called although done never closed") })
	cancel2()
}
