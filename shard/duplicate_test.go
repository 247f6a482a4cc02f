package shard_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/memory"
)

// dupWarning is the start of the warning of a member whose liveness lease
// its own identity holds elsewhere.
const dupWarning = "shard: this member's liveness lease is held by its own identity under another grant"

// recordHandler is a slog handler that keeps every warning's message and
// attributes, and signals each on warned.
type recordHandler struct {
	mu     sync.Mutex
	lines  []string
	warned chan struct{}
}

func (h *recordHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *recordHandler) WithGroup(string) slog.Handler                { return h }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	h.mu.Lock()
	h.lines = append(h.lines, line)
	h.mu.Unlock()
	select {
	case h.warned <- struct{}{}:
	default:
	}
	return nil
}

func (h *recordHandler) matching(prefix string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range h.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// TestDuplicateIdentityIsLogged: a second member started with the identity
// of a running one waits, as before, without leading anything, but says
// why in one warning naming the group, the identity and the liveness
// lease, instead of waiting silently; once the first stops it takes over,
// without a second warning. Before, it logged nothing at all.
func TestDuplicateIdentityIsLogged(t *testing.T) {
	st := memory.New(nil)
	cfg := func(l *slog.Logger) shard.Config {
		return shard.Config{Store: st, Group: "g", Identity: "a", Members: []string{"a", "b"},
			Keys: shard.Numbered(4), TTL: time.Second, Logger: l}
	}
	quiet := slog.New(slog.DiscardHandler)
	first, err := shard.New(cfg(quiet))
	if err != nil {
		t.Fatal(err)
	}
	leads, stop1 := runMember(t, first)
	<-leads // the first member is live and leads

	h := &recordHandler{warned: make(chan struct{}, 1)}
	second, err := shard.New(cfg(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	leads2, stop2 := runMember(t, second)
	deadline := time.After(10 * time.Second)
	for len(h.matching(dupWarning)) == 0 {
		select {
		case <-h.warned:
		case <-deadline:
			stop2()
			stop1()
			t.Fatalf("no warning about the duplicate identity; warnings: %q", h.matching(""))
		}
	}
	w := h.matching(dupWarning)[0]
	for _, want := range []string{"group=g", "id=a", "key=g/members/a", "same identity"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	if l := second.Leading(); len(l) != 0 {
		t.Errorf("the duplicate leads %v while the first member runs", l)
	}

	if err := stop1(); err != context.Canceled {
		t.Errorf("first Run = %v", err)
	}
	// The duplicate takes over: it leads every key (b is not live), some
	// perhaps twice, as the first member's keys and liveness end apart.
	got := map[string]bool{}
	for len(got) < 4 {
		select {
		case k := <-leads2:
			got[k] = true
		case <-deadline:
			stop2()
			t.Fatalf("the second member led only %v after the first stopped", got)
		}
	}
	if err := stop2(); err != context.Canceled {
		t.Errorf("second Run = %v", err)
	}
	if n := len(h.matching(dupWarning)); n != 1 {
		t.Errorf("%d duplicate warnings, want 1: %q", n, h.matching(dupWarning))
	}
	if n := len(h.matching("")); n != 1 {
		t.Errorf("other warnings: %q", h.matching(""))
	}
}

// runMember runs sh with a task that reports each key it leads on leads
// and holds it until its context ends. stop ends the Run and returns its
// error (once; later calls return the same).
func runMember(t *testing.T, sh *shard.Sharder) (leads chan string, stop func() error) {
	t.Helper()
	leads = make(chan string, 16)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- sh.Run(ctx, func(ctx context.Context, key string) error {
			leads <- key
			<-ctx.Done()
			return nil
		})
	}()
	var once sync.Once
	var err error
	return leads, func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
}
