// Package unchanged remembers, per key, the version of a record a process
// saw last and when it first saw it. Stores whose server does not expire a
// grant (a Kubernetes Lease; a NATS entry written from outside without a
// TTL) judge by it that a holder stopped renewing: a version seen
// unchanged for the grant's duration, on this process's monotonic clock.
package unchanged

import (
	"sync"
	"time"
)

// Tracker holds the sightings. The zero value is ready to use; it is safe
// for concurrent use.
type Tracker[V comparable] struct {
	mu sync.Mutex
	m  map[string]sighting[V]
}

type sighting[V comparable] struct {
	v  V
	at time.Time // with a monotonic reading
}

// Since returns how long version v of key has been seen unchanged,
// recording now as its first sighting if v is not the version seen last.
// now must come from after v was read, so that the holder's last write
// happened before it.
func (t *Tracker[V]) Since(key string, v V, now time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]sighting[V]{}
	}
	s, found := t.m[key]
	if !found || s.v != v {
		t.m[key] = sighting[V]{v: v, at: now}
		return 0
	}
	return now.Sub(s.at)
}

// Forget drops what was seen of key (its record is gone).
func (t *Tracker[V]) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, key)
}
