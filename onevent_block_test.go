package tenure_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// An OnEvent callback that blocks (against its doc) stalls the elector's
// goroutine, and with it the renewals; it must not also keep the leader
// context alive past the renew deadline, or the task would go on leading
// after the store gave the key to another candidate.
func TestBlockingOnEventStillCancelsByTheRenewDeadline(t *testing.T) {
	for _, kind := range []tenure.EventKind{tenure.EventElected, tenure.EventRenewed} {
		t.Run(kind.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memory.New(nil)
				unblock := make(chan struct{})
				var once sync.Once
				ca := config(mem, "a")
				ca.OnEvent = func(ev tenure.Event) {
					if ev.Kind == kind {
						once.Do(func() { <-unblock })
					}
				}
				b := newBook()
				ra := start(newElector(t, ca), b.task("a", nil))
				synctest.Wait()
				rb := start(newElector(t, config(mem, "b")), b.task("b", nil))
				var ta *term
				startedEarly := false
				for tm := range b.began {
					if tm.id == "a" {
						ta = tm
						startedEarly = kind == tenure.EventElected
						continue
					}
					break // b leads
				}
				// Once OnEvent returns, a must see that its term is over
				// before its task could start or go on.
				close(unblock)
				synctest.Wait()
				b.mu.Lock()
				most := b.max
				var cause error
				if ta != nil {
					cause = ta.cause
				}
				b.mu.Unlock()
				rb.stop()
				if err := ra.stop(); !errors.Is(err, context.Canceled) {
					t.Errorf("a's Run = %v, want context.Canceled", err)
				}
				if startedEarly {
					t.Error("a's task started while OnEvent(elected) blocked")
				}
				if most != 1 {
					t.Fatalf("%d tasks led at once while a's OnEvent blocked", most)
				}
				if ta != nil && !errors.Is(cause, tenure.ErrRenewDeadline) {
					t.Fatalf("a's task ended with cause %v, want ErrRenewDeadline", cause)
				}
			})
		})
	}
}
