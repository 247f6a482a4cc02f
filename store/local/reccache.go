package local

import (
	"bytes"
	"sync"
	"sync/atomic"
)

// recordCache remembers, for each record this handle last wrote with a
// holder, the bytes written and the state they encode. Reading those same
// bytes back, which is what the holder's next renewal and every watch of
// the key woken by the write do, then costs a comparison instead of a
// decode (in an idle `tenure run`, decoding was about a twentieth of its
// CPU). Only an exact match is trusted: any other content, a record
// replaced or rewritten by anyone, is decoded and checked as before. An
// entry goes when the handle writes the key free or drops its grant of
// the key, so the cache holds at most one record per key the handle
// holds, or held last. Safe for concurrent use; a nil cache (the .terms
// directory's) remembers nothing.
type recordCache struct {
	mu   sync.Mutex
	m    map[string]cachedRecord // by file name in the state directory
	hits atomic.Uint64           // for tests
}

type cachedRecord struct {
	data []byte
	st   state
}

func newRecordCache() *recordCache { return &recordCache{m: make(map[string]cachedRecord)} }

// wrote notes that data, the encoding of st, is now the content of name.
// A record without a holder is not kept: nobody renews it.
func (c *recordCache) wrote(name string, data []byte, st state) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.Holder == "" {
		delete(c.m, name)
		return
	}
	c.m[name] = cachedRecord{data: data, st: st}
}

// lookup returns the state encoded by data if data is exactly what this
// handle last wrote to name.
func (c *recordCache) lookup(name string, data []byte) (state, bool) {
	if c == nil {
		return state{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[name]
	if !ok || !bytes.Equal(r.data, data) {
		return state{}, false
	}
	c.hits.Add(1)
	return r.st, true
}

// forget drops name's entry.
func (c *recordCache) forget(name string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}
