package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// TermsExhausted fails t unless err, what a call (what) on key answered,
// is one line matching [tenure.ErrTermsExhausted] that names key (quoted)
// and limit, how the store names the top of its term range ("2^63-1").
func TermsExhausted(t testing.TB, what string, err error, key, limit string) {
	t.Helper()
	if err == nil || !errors.Is(err, tenure.ErrTermsExhausted) || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) ||
		!strings.Contains(err.Error(), limit) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%s of %q: %v; want one line matching ErrTermsExhausted naming the key and %s", what, key, err, limit)
	}
}

// SessionRefusesExhausted checks that a session refuses key, whose term
// was forged to the top of the store's range (limit, as for
// [TermsExhausted]), twice through Acquire and twice through an
// AcquireBatch that also asks for a fresh key, which it must grant. open
// returns the session for each of the two ways, so a test can give each
// a store handle that has not seen the forged term.
func SessionRefusesExhausted(t testing.TB, open func() tenure.StoreSession, key, limit string) {
	t.Helper()
	for _, batch := range []bool{false, true} {
		ss := open()
		for range 2 { // the second time, the handle has seen the term
			if !batch {
				_, err := ss.Acquire(ctxFor(t), key, "beta", "")
				TermsExhausted(t, "session Acquire", err, key, limit)
				continue
			}
			other := Key(t)
			res := ss.(tenure.BatchAcquirer).AcquireBatch(ctxFor(t), []tenure.AcquireRequest{
				{Key: other, Identity: "beta"}, {Key: key, Identity: "beta"}})
			if len(res) != 2 || res[0].Err != nil {
				t.Fatalf("AcquireBatch of %q and %q: %+v; want the fresh key %q granted", other, key, res, other)
			}
			TermsExhausted(t, "AcquireBatch", res[1].Err, key, limit)
		}
	}
}

// AcquireOne asks ss for key as id, through Acquire, or, with batch,
// through an AcquireBatch of that one request.
func AcquireOne(t testing.TB, ss tenure.StoreSession, key, id string, batch bool) (tenure.Lease, error) {
	t.Helper()
	if !batch {
		return ss.Acquire(ctxFor(t), key, id, "")
	}
	res := ss.(tenure.BatchAcquirer).AcquireBatch(ctxFor(t), []tenure.AcquireRequest{{Key: key, Identity: id}})
	if len(res) != 1 {
		t.Fatalf("AcquireBatch of one request returned %d results", len(res))
	}
	return res[0].Lease, res[0].Err
}

// SessionOutgrowsForgedTerm checks, where the server assigns the terms
// (etcd's revisions, ZooKeeper's zxids), that a key whose record forge
// rewrote from outside after a grant and release on st is still granted
// by ss, through Acquire and through AcquireBatch, at a term above every
// term shown: the forged record neither exhausts nor wraps the key's terms.
func SessionOutgrowsForgedTerm(t testing.TB, st tenure.Store, ss tenure.StoreSession, forge func(key string) error) {
	t.Helper()
	for _, batch := range []bool{false, true} {
		key := fmt.Sprint("forged-", batch) // plain, for forge to find
		l, err := st.Acquire(ctxFor(t), key, "alpha", 5*time.Second)
		if err == nil {
			err = st.Release(ctxFor(t), l)
		}
		if err == nil {
			err = forge(key)
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.Get(ctxFor(t), key)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := AcquireOne(t, ss, key, "beta", batch)
		if err != nil {
			t.Fatalf("batch %v: session Acquire after a forged record: %v", batch, err)
		}
		if l2.Term <= r.Term || l2.Term <= l.Term {
			t.Fatalf("batch %v: Get showed the key at term %d after term %d, then the session granted term %d", batch, r.Term, l.Term, l2.Term)
		}
	}
}

// Tampered fails t unless err, what a call (what) on key answered after
// the key's record was changed from outside, is one line of at most 512
// bytes that names key (quoted), matches want (any error if want is nil),
// and quotes none of raw: the driver's or server's own wording
// ("WRONGTYPE", "user_script"), which tells an operator nothing of which
// record is wrong.
func Tampered(t testing.TB, what string, err error, key string, want error, raw ...string) {
	t.Helper()
	if err == nil || want != nil && !errors.Is(err, want) {
		t.Fatalf("%s of %q: %v; want an error matching %v", what, key, err, want)
	}
	msg := err.Error()
	if !strings.Contains(msg, fmt.Sprintf("%q", key)) || strings.Contains(msg, "\n") || len(msg) > 512 {
		t.Fatalf("%s of %q: %q; want one short line naming the key", what, key, msg)
	}
	for _, r := range raw {
		if strings.Contains(msg, r) {
			t.Fatalf("%s of %q: %q; want the store's own words, not %q", what, key, msg, r)
		}
	}
}
