package shard_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/memory"
)

// Run with a nil task used to lead the keys and crash the process from
// the first key's task goroutine; a nil ctx panicked on a nil parent.
func TestRunRefusesNilTaskAndNilContext(t *testing.T) {
	mem := memory.New(nil)
	s, err := shard.New(shard.Config{Store: mem, Group: "g", Identity: "a", Members: []string{"a"},
		Keys: shard.Numbered(2), TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(context.Background(), nil); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("Run(ctx, nil) = %v, want an error wrapping ErrInvalid", err)
	}
	var nilCtx context.Context
	if err := s.Run(nilCtx, func(context.Context, string) error { return nil }); !errors.Is(err, tenure.ErrInvalid) {
		t.Errorf("Run(nil, task) = %v, want an error wrapping ErrInvalid", err)
	}
	for _, k := range []string{"g/members/a", "g/keys/0", "g/keys/1"} {
		if rec, err := mem.Get(context.Background(), k); err != nil || rec.Holder != "" {
			t.Errorf("%s = %+v, %v: want never acquired", k, rec, err)
		}
	}
}
