package tenure

import "context"

// RankForTest is the number of distinct priorities above p among the
// other candidates as e last read them.
func (e *Elector) RankForTest(p int) int { return e.ctl.rank(e.cfg.Identity, p) }

// BeforeAcquireForTest runs what e does before each Acquire.
func (e *Elector) BeforeAcquireForTest(ctx context.Context) error { return e.beforeAcquire(ctx) }

// CandidateKeyForTest is the key of registration slot i of key.
func CandidateKeyForTest(key string, i int) string { return candidateKey(key, i) }
