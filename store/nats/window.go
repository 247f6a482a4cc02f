package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// widen makes sure the key's window entry is at least ttl before a grant
// of ttl is written, so that whoever finds that grant deleted from outside
// knows how long its holder may still lead.
func (s *Store) widen(ctx context.Context, key string, ttl time.Duration) error {
	s.winMu.Lock()
	known := s.win[key]
	s.winMu.Unlock()
	if known >= ttl {
		return nil
	}
	kv, _, err := s.usable(ctx)
	if err != nil {
		return err
	}
	wk := s.windowKey(key)
	for range attempts {
		cur, rev, err := s.readWindow(ctx, kv, key)
		if err != nil {
			return err
		}
		if cur >= ttl {
			s.remember(key, cur)
			return nil
		}
		val := []byte(strconv.FormatInt(int64(ttl), 10))
		if rev == 0 {
			_, err = kv.Create(ctx, wk, val)
		} else {
			_, err = kv.Update(ctx, wk, val, rev)
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			continue // another grant's write came first: read again
		}
		if err != nil {
			return s.fail(ctx, fmt.Sprintf("acquire %q (write its TTL window)", key), err)
		}
		s.remember(key, ttl)
		return nil
	}
	return s.fail(ctx, fmt.Sprintf("acquire %q (write its TTL window)", key), fmt.Errorf("lost %d races in a row", attempts))
}

func (s *Store) remember(key string, ttl time.Duration) {
	s.winMu.Lock()
	defer s.winMu.Unlock()
	s.win[key] = max(s.win[key], ttl)
}

// readWindow returns the key's window entry and its revision (0 when
// there is none). A value that is not a positive number of nanoseconds
// (written from outside) counts as none, and is overwritten.
func (s *Store) readWindow(ctx context.Context, kv jetstream.KeyValue, key string) (time.Duration, uint64, error) {
	e, err := kv.Get(ctx, s.windowKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, 0, nil // Create writes over a delete marker too
	}
	if err != nil {
		return 0, 0, s.fail(ctx, fmt.Sprintf("read the TTL window of %q", key), err)
	}
	n, err := strconv.ParseInt(string(e.Value()), 10, 64)
	if err != nil || n <= 0 {
		return 0, e.Revision(), nil
	}
	return time.Duration(n), e.Revision(), nil
}

// window returns the longest TTL granted for key, as its window entry
// says (0 if it is gone).
func (s *Store) window(ctx context.Context, key string) (time.Duration, error) {
	kv, _, err := s.usable(ctx)
	if err != nil {
		return 0, err
	}
	w, _, err := s.readWindow(ctx, kv, key)
	return w, err
}
