//go:build linux

package local_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/tenurehq/tenure/store/local"
)

// A holder's renewal reads back the record it wrote last: it must not
// decode it again, and nothing else may be served from what it wrote.
func TestOwnRecordIsReadBackWithoutDecoding(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a := open(t, dir)
	l := acquire(t, a, "k", "a", time.Minute)
	for range 5 {
		if err := a.Renew(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if n := local.CachedReads(a); n < 5 {
		t.Fatalf("5 renewals read back their own record without decoding %d times, want 5", n)
	}

	// Another handle rewrites the record (here: takes the key after a's
	// grant is deleted from outside): a must see the new content, not
	// what it wrote.
	b := open(t, dir)
	if err := os.Remove(statePath(t, dir)); err != nil {
		t.Fatal(err)
	}
	before := local.CachedReads(a)
	lb := acquire(t, b, "k", "b", time.Minute)
	rec, err := a.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Holder != "b" || rec.Term != lb.Term {
		t.Fatalf("a reads holder %q term %d, want b's grant, term %d", rec.Holder, rec.Term, lb.Term)
	}
	if local.CachedReads(a) != before {
		t.Fatal("a served b's record from its cache")
	}
	if err := a.Renew(ctx, l); err == nil {
		t.Fatal("a renewed a grant whose record b replaced")
	}
}
