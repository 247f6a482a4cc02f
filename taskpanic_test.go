package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// A task that panics used to crash the process from the task's goroutine,
// with the lease still held: the other candidates waited for it to expire.
// The panic now reaches the caller of Run or Do, after the lease was
// released, with the task's stack in its message.
func TestTaskPanicReleasesAndRepanicsInTheCaller(t *testing.T) {
	for _, do := range []bool{false, true} {
		t.Run(fmt.Sprint("do=", do), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.New(nil)
				e := newElector(t, config(mem, "a"))
				var task tenure.Task = func(context.Context) error { panic("boom") }
				got := make(chan any, 1)
				go func() {
					defer func() { got <- recover() }()
					if do {
						e.Do(context.Background(), task)
					} else {
						e.Run(context.Background(), task)
					}
				}()
				p := <-got
				err, ok := p.(error)
				if !ok || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "taskpanic_test.go") {
					t.Fatalf("recovered %v, want an error naming the task's panic and its stack", p)
				}
				if rec, err := mem.Get(context.Background(), "job"); err != nil || rec.Holder != "" {
					t.Fatalf("key = %+v, %v after the panic, want released", rec, err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if err := e.Do(ctx, func(context.Context) error { return nil }); !errors.Is(err, context.Canceled) {
					t.Fatalf("Do after the panic = %v, want the elector usable again", err)
				}
			})
		})
	}
}

// A task that calls runtime.Goexit (t.Fatal inside a task, say) never
// returned a result: Do and Run waited for it forever while renewing the
// lease.
func TestTaskGoexitEndsDoAndRun(t *testing.T) {
	for _, do := range []bool{false, true} {
		t.Run(fmt.Sprint("do=", do), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.New(nil)
				e := newElector(t, config(mem, "a"))
				ctx, cancel := context.WithTimeout(context.Background(), 20*ttl)
				defer cancel()
				task := func(context.Context) error { runtime.Goexit(); return nil }
				var err error
				if do {
					err = e.Do(ctx, task)
				} else {
					err = e.Run(ctx, task)
				}
				if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "Goexit") {
					t.Fatalf("= %v (ctx: %v), want an error naming Goexit before ctx ends", err, ctx.Err())
				}
				if rec, err := mem.Get(context.Background(), "job"); err != nil || rec.Holder != "" {
					t.Fatalf("key = %+v, %v, want released", rec, err)
				}
			})
		})
	}
}
