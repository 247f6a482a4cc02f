package etcd

import (
	"time"

	"github.com/tenurehq/tenure"
)

var _ tenure.TTLRanger = (*Store)(nil)

// TTLRange implements [tenure.TTLRanger]: at least one second, since etcd
// leases are granted in whole seconds (a shorter TTL would silently become
// a one-second lease, or the server's minimum, which is longer). No upper
// bound beyond [tenure.MaxTTL].
func (s *Store) TTLRange() (min, max time.Duration) { return time.Second, 0 }
