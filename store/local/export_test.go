//go:build linux

package local

// SetRunUserDir points DefaultDir's /run/user at dir until the returned
// function is called.
func SetRunUserDir(dir string) (restore func()) {
	old := runUserDir
	runUserDir = dir
	return func() { runUserDir = old }
}

// ForgetSeen drops this process's memory of the terms of every key in the
// state directory dir (an absolute path), so a test can check what the
// files alone guarantee.
func ForgetSeen(dir string) {
	seen.Lock()
	defer seen.Unlock()
	for k := range seen.m {
		if k.dir == dir {
			delete(seen.m, k)
		}
	}
}

// BaseName is the file-name prefix of key's files in a state directory.
func BaseName(key string) string { return baseName(key) }

// TermsDir is the directory, inside a state directory, of the keys' term
// records.
const TermsDir = termsDir

// WatchCounts returns how many events s dispatched to its watches (one per
// event and key, however many watches it woke) and how many reads it made
// for them.
func WatchCounts(s *Store) (events, reads uint64) {
	return s.watchEvents.Load(), s.watchReads.Load()
}

// CachedReads returns how many records s read back without decoding them,
// because they were exactly what s last wrote.
func CachedReads(s *Store) uint64 { return s.d.recs.hits.Load() }
