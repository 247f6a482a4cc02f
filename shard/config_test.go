package shard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/memory"
)

func TestNewRejectsBadConfig(t *testing.T) {
	ok := func() shard.Config {
		return shard.Config{Store: memory.New(nil), Group: "g", Identity: "a", Members: []string{"a", "b"}, Keys: shard.Numbered(3)}
	}
	for _, tc := range []struct {
		name string
		edit func(*shard.Config)
		want string
	}{
		{"no store", func(c *shard.Config) { c.Store = nil }, "Config.Store is nil"},
		{"no group", func(c *shard.Config) { c.Group = "" }, "Config.Group is empty"},
		{"group with a keys segment", func(c *shard.Config) { c.Group = "a/keys/b" }, `Config.Group: tenure: invalid argument: shard: group "a/keys/b" has the path segment "keys"`},
		{"group with a members segment", func(c *shard.Config) { c.Group = "a/members" }, `(a/members/members/ID is also member "members/ID" of group "a")`},
		{"no members", func(c *shard.Config) { c.Members = nil }, "Config.Members is empty"},
		{"not a member", func(c *shard.Config) { c.Identity = "z" }, `Config.Identity ("z") is not one of Config.Members`},
		{"duplicate member", func(c *shard.Config) { c.Members = []string{"a", "a"} }, `Config.Members lists "a" twice`},
		{"no keys", func(c *shard.Config) { c.Keys = nil }, "Config.Keys is empty"},
		{"duplicate key", func(c *shard.Config) { c.Keys = []string{"x", "x"} }, `Config.Keys lists "x" twice`},
		{"bad key", func(c *shard.Config) { c.Keys = []string{"x\n"} }, "control character"},
		{"long key", func(c *shard.Config) { c.Keys = []string{strings.Repeat("k", tenure.MaxKeyLen)} }, "longer than the limit"},
		{"ttl", func(c *shard.Config) { c.TTL = time.Millisecond }, "Config.TTL (1ms) must be from"},
		// Not about Takeover or Reclaim, which default from the TTL.
		{"negative ttl", func(c *shard.Config) { c.TTL = -time.Second }, "Config.TTL (-1s) must be positive"},
		{"takeover", func(c *shard.Config) { c.Takeover = -time.Second }, "Config.Takeover (-1s) must be positive"},
	} {
		c := ok()
		tc.edit(&c)
		_, err := shard.New(c)
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: New = %v, want an ErrInvalid naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := shard.New(ok()); err != nil {
		t.Errorf("New(valid config) = %v", err)
	}
}

// Importing shard costs what importing the root package costs: the
// standard library only.
func TestImportsOnlyTheRootAndTheStandardLibrary(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/tenurehq/tenure" || dep == "github.com/tenurehq/tenure/shard" {
			continue
		}
		if first, _, _ := strings.Cut(dep, "/"); strings.Contains(first, ".") {
			t.Errorf("package shard depends on %s; it must use the root package and the standard library only", dep)
		}
	}
}

// A second Run while one is active returns ErrRunning; when Run's context
// ends, Run returns its error only after every lease was released; a later
// Run works again.
func TestRunOnceAndReleaseOnReturn(t *testing.T) {
	simulation(t)
	synctest.Test(t, func(t *testing.T) {
		st := memory.New(nil)
		s, err := shard.New(shard.Config{Store: st, Group: "g", Identity: "a", Members: []string{"a"},
			Keys: shard.Numbered(3), TTL: time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		task := func(ctx context.Context, key string) error { <-ctx.Done(); return nil }
		go func() { done <- s.Run(ctx, task) }()
		time.Sleep(100 * time.Millisecond)
		if got := s.Leading(); len(got) != 3 {
			t.Fatalf("alone, a member leads %v, want all 3 keys", got)
		}
		if err := s.Run(ctx, task); !errors.Is(err, tenure.ErrRunning) {
			t.Errorf("second Run = %v, want ErrRunning", err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		for _, k := range []string{"g/members/a", "g/keys/0", "g/keys/1", "g/keys/2"} {
			if r, _ := st.Get(context.Background(), k); r.Held() {
				t.Errorf("after Run returned, %s is still held by %s", k, r.Holder)
			}
		}
		if got := s.Leading(); len(got) != 0 {
			t.Errorf("after Run returned, Leading = %v", got)
		}

		// Run again: it starts from a fresh view and leads everything again.
		ctx, cancel = context.WithCancel(context.Background())
		go func() { done <- s.Run(ctx, task) }()
		time.Sleep(100 * time.Millisecond)
		if got := s.Leading(); len(got) != 3 {
			t.Errorf("second Run leads %v, want all 3 keys", got)
		}
		cancel()
		<-done
	})
}

// exhaustedKey is a store on which one key can no longer be granted, as
// after its term was forged to the top of its range, until repaired.
type exhaustedKey struct {
	tenure.Store
	key      string
	repaired atomic.Bool
}

func (s *exhaustedKey) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	if key == s.key && !s.repaired.Load() {
		return tenure.Lease{}, fmt.Errorf("%w: key %q", tenure.ErrTermsExhausted, key)
	}
	return s.Store.Acquire(ctx, key, identity, ttl)
}

// A key whose terms are exhausted is logged and left unled while the
// member leads its other keys, and is tried again a TTL later, so that it
// is led once an operator repaired its record. Before, its goroutine
// ended without a word and the key stayed unled until the member
// restarted.
func TestExhaustedKeyIsLoggedAndTriedAgain(t *testing.T) {
	simulation(t)
	synctest.Test(t, func(t *testing.T) {
		var logs syncbuf.Buffer
		st := &exhaustedKey{Store: memory.New(nil), key: "g/keys/1"}
		s, err := shard.New(shard.Config{Store: st, Group: "g", Identity: "a", Members: []string{"a"},
			Keys: shard.Numbered(3), TTL: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- s.Run(ctx, func(ctx context.Context, key string) error { <-ctx.Done(); return nil })
		}()
		time.Sleep(10 * time.Second) // ten TTLs of the bubble's fake time
		select {
		case err := <-done:
			t.Fatalf("Run returned %v with one key exhausted", err)
		default:
		}
		if got := s.Leading(); !slices.Equal(got, []string{"0", "2"}) {
			t.Errorf("Leading = %v, want the keys 0 and 2", got)
		}
		if !strings.Contains(logs.String(), "terms are exhausted") || !strings.Contains(logs.String(), "key=1") {
			t.Errorf("the exhausted key was not logged:\n%s", logs.String())
		}
		st.repaired.Store(true)
		time.Sleep(2 * time.Second)
		if got := s.Leading(); !slices.Equal(got, []string{"0", "1", "2"}) {
			t.Errorf("two TTLs after the key was repaired, Leading = %v, want every key", got)
		}
		cancel()
		<-done
	})
}

// A member whose own liveness lease's terms are exhausted can never be
// live: Run returns the error instead of running on, leading nothing.
func TestExhaustedLivenessEndsRun(t *testing.T) {
	simulation(t)
	synctest.Test(t, func(t *testing.T) {
		st := &exhaustedKey{Store: memory.New(nil), key: "g/members/a"}
		s, err := shard.New(shard.Config{Store: st, Group: "g", Identity: "a", Members: []string{"a"},
			Keys: shard.Numbered(2), TTL: time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // of the bubble's fake time
		defer cancel()
		err = s.Run(ctx, func(ctx context.Context, key string) error { <-ctx.Done(); return nil })
		if !errors.Is(err, tenure.ErrTermsExhausted) {
			t.Fatalf("Run = %v, want ErrTermsExhausted for the member's liveness lease", err)
		}
	})
}
