package redis

import (
	"context"
	"errors"
	"fmt"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/storeurl"
)

// EvictionCheckParam is the URL parameter that, set to "skip", stops the
// store from checking the server's maxmemory-policy, for a managed Redis
// that refuses CONFIG GET and that you know runs with noeviction.
const EvictionCheckParam = "tenure_eviction_check"

// checkEviction makes sure, once per Store and before its first grant, that
// the server evicts no keys: under any maxmemory-policy but noeviction a
// full server may evict a lease key (two holders) or a term counter (terms
// restart). It returns an error matching [tenure.ErrInvalid] naming the
// policy and the fix if the policy is another, or if CONFIG GET is refused
// and the URL does not set [EvictionCheckParam]=skip. A network failure is
// returned as such, and the check is tried again at the next Acquire. It
// asks through c.
func (s *Store) checkEviction(ctx context.Context, c *goredis.Client) error {
	s.evictionMu.Lock()
	defer s.evictionMu.Unlock()
	if s.evictionSkip || s.evictionCheck != "" {
		return nil
	}
	var cur map[string]string
	err := s.call(ctx, func() (err error) {
		cur, err = c.ConfigGet(ctx, "maxmemory-policy").Result()
		return err
	})
	var rerr goredis.Error
	switch {
	case errors.As(err, &rerr):
		return fmt.Errorf("%w: tenure/redis: %s refuses CONFIG GET maxmemory-policy (%v), so tenure cannot check that it never evicts lease keys or term counters; if the server runs with maxmemory-policy noeviction, add %s=skip to the URL",
			tenure.ErrInvalid, s.redacted, storeurl.Scrub(s.secret, err), EvictionCheckParam)
	case err != nil:
		return s.fail(ctx, "check maxmemory-policy", err)
	}
	policy, ok := cur["maxmemory-policy"]
	if !ok {
		return fmt.Errorf("%w: tenure/redis: %s does not report maxmemory-policy; if it runs with noeviction, add %s=skip to the URL",
			tenure.ErrInvalid, s.redacted, EvictionCheckParam)
	}
	if policy != "noeviction" {
		return fmt.Errorf("%w: tenure/redis: %s has maxmemory-policy %s, which can evict lease keys and term counters (two leaders, terms going back); run CONFIG SET maxmemory-policy noeviction (and persist it in redis.conf), or add %s=skip to the URL to accept the risk",
			tenure.ErrInvalid, s.redacted, policy, EvictionCheckParam)
	}
	s.evictionCheck = "maxmemory-policy noeviction (checked with CONFIG GET)"
	return nil
}

// EvictionCheck reports what the store checked of the server's eviction
// policy: the policy it read, or that the URL skipped the check. It runs
// the check if no Acquire has yet, bounded by ctx, and returns its error.
func (s *Store) EvictionCheck(ctx context.Context) (string, error) {
	if err := s.begin(ctx); err != nil {
		return "", err
	}
	if err := s.checkEviction(ctx, s.client); err != nil {
		return "", err
	}
	s.evictionMu.Lock()
	defer s.evictionMu.Unlock()
	if s.evictionSkip {
		return "maxmemory-policy not checked (" + EvictionCheckParam + "=skip)", nil
	}
	return s.evictionCheck, nil
}

// TermRepairs is how many times this Store found a key's term counter at or
// below a term it had already seen (the counter deleted or evicted) and
// moved it past that term.
func (s *Store) TermRepairs() uint64 { return s.repairs.Load() }
