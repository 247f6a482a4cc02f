package memory_test

import (
	"context"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
	"github.com/tenurehq/tenure/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	shared := memory.New(nil)
	storetest.Run(t, storetest.Options{
		Sessions: true,
		Open:     func(testing.TB) tenure.Store { return shared.Handle() },
		Tamper: &storetest.Tamper{
			DeleteGrant:    func(_ testing.TB, key string) { memory.DeleteGrant(shared, key) },
			OverwriteGrant: func(_ testing.TB, key, id string) { memory.OverwriteGrant(shared, key, id) },
			DeleteAll:      func(_ testing.TB, key string) { memory.DeleteAll(shared, key) },
		},
	})
}

func TestCloseEndsWatches(t *testing.T) {
	s := memory.New(nil)
	ch, err := s.Watch(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	<-ch // the initial record
	s.Close()
	for range ch {
	}
	if _, err := s.Get(context.Background(), "k"); err != tenure.ErrClosed {
		t.Fatalf("Get after Close: %v", err)
	}
}

func BenchmarkFailover(b *testing.B) {
	shared := memory.New(nil)
	storetest.BenchFailover(b, storetest.BenchOptions{
		Open:   func(testing.TB) tenure.Store { return shared.Handle() },
		TTL:    500 * time.Millisecond,
		Trials: 20,
	})
}
