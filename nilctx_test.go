package tenure_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// A nil context (a mistake go vet does not catch) used to panic on a nil
// pointer deep inside, sometimes in a goroutine of its own (a crash), or
// with a store lock held (every later call hung). Each blocking call now
// refuses it up front with an error wrapping ErrInvalid that says so.
func TestNilContextIsInvalid(t *testing.T) {
	var nilCtx context.Context
	mem := memory.New(nil)
	e := newElector(t, config(mem, "a"))
	sess, err := tenure.NewSession(tenure.SessionConfig{Store: mem, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	held, err := sess.Campaign(context.Background(), "held", "a", "")
	if err != nil {
		t.Fatal(err)
	}
	o := &tenure.Observer{Store: mem, Key: "job"}
	task := func(context.Context) error { return nil }
	calls := map[string]func() error{
		"Elector.Run":      func() error { return e.Run(nilCtx, task) },
		"Elector.Do":       func() error { return e.Do(nilCtx, task) },
		"Observer.Current": func() error { _, err := o.Current(nilCtx); return err },
		"Session.Campaign": func() error { _, err := sess.Campaign(nilCtx, "job", "a", ""); return err },
		"AwaitSuccessor":   func() error { _, err := tenure.AwaitSuccessor(nilCtx, mem, "job", 0); return err },
		"Candidates":       func() error { _, err := tenure.Candidates(nilCtx, mem, "job"); return err },
		"ReadPreference":   func() error { _, _, err := tenure.ReadPreference(nilCtx, mem, "job"); return err },
		"RequestStepDown": func() error {
			_, err := tenure.RequestStepDown(nilCtx, mem, "job", tenure.StepDownRequest{})
			return err
		},
		"Prefer": func() error {
			return tenure.Prefer(nilCtx, mem, "job", "op", ttl, tenure.Preference{Holder: "b"})
		},
		"Open":          func() error { _, err := tenure.Open(nilCtx, "memory://nilctx"); return err },
		"Session.Close": func() error { return sess.Close(nilCtx) },
	}
	for name, call := range calls {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s(nil ctx) panicked: %v", name, r)
				}
			}()
			if err := call(); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "nil context") {
				t.Errorf("%s(nil ctx) = %v, want an error wrapping ErrInvalid about the nil context", name, err)
			}
		}()
	}
	quiet := &tenure.Observer{Store: mem, Key: "job", Logger: slog.New(slog.DiscardHandler)}
	select {
	case _, ok := <-quiet.Changes(nilCtx):
		if ok {
			t.Error("Observer.Changes(nil ctx) delivered, want its channel closed")
		}
	case <-time.After(5 * time.Second):
		t.Error("Observer.Changes(nil ctx): channel not closed")
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "nil context") {
				t.Errorf("Leadership.Resign(nil ctx) recovered %v, want a panic about the nil context, as the context package does", r)
			}
		}()
		held.Resign(nilCtx)
	}()
	held.Resign(context.Background()) // the nil one consumed nothing
	if rec, err := mem.Get(context.Background(), "held"); err != nil || rec.Holder != "" {
		t.Errorf("held = %+v, %v after Resign, want released", rec, err)
	}
	if err := sess.Close(context.Background()); err != nil {
		t.Error(err)
	}
}
