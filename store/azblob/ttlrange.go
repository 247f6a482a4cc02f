package azblob

import (
	"time"

	"github.com/tenurehq/tenure"
)

var _ tenure.TTLRanger = (*Store)(nil)

// TTLRange implements [tenure.TTLRanger]: Azure blob leases last from
// [MinTTL] to [MaxTTL] (15 to 60 s), in whole seconds.
func (s *Store) TTLRange() (min, max time.Duration) { return MinTTL, MaxTTL }
