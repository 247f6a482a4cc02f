// Package storetest is the conformance suite of [tenure.Store]. Every store's
// tests call [Run] against the real backend; a store that passes can be used
// by the elector with the guarantees the tenure package documents. It is
// part of tenure's public testing kit, with package faultstore: a store
// written outside this module runs the same suite.
//
// It imports package testing, so import it only from _test.go files.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// Options describes the store under test.
type Options struct {
	// Open returns a new handle on the store under test, as a separate
	// process would have: handles share keys but nothing else. The suite
	// closes the handles it opens. Required.
	Open func(t testing.TB) tenure.Store

	// TTL is the lease duration the suite grants; stores with a minimum
	// (Azure blob leases: 15s) set it. Default 1s.
	TTL time.Duration
	// Tolerance bounds how late a store may be: an expired grant must be
	// acquirable, and a watch delivery must arrive, within Tolerance.
	// Default 500ms.
	Tolerance time.Duration
	// MaxTTL, if set, is the longest TTL the store accepts (Azure blob
	// leases: 60s); cases that want a grant to outlive the test by a wide
	// margin ask for min(k×TTL, MaxTTL).
	MaxTTL time.Duration
	// Restart, if set, restarts the backend (same data, new process); the
	// suite then checks that terms keep growing across the restart. Handles
	// opened before it may be broken afterwards.
	Restart func(t testing.TB)
	// Tamper, if set, changes the store's data behind tenure's back with the
	// store's own client, as an operator cleaning up or another tool
	// writing under tenure's prefix would; the cases "grant deleted from
	// outside", "grant overwritten from outside" and "term counter deleted
	// from outside" use it and skip without it.
	Tamper *Tamper
	// Sessions requires the store to implement [tenure.SessionStore]; its
	// cases run for every store that does, and skip for one that does not
	// unless this is set.
	Sessions bool
}

// Tamper changes a store's data without going through tenure. Each store's
// test implements it with the backend's own client (raw etcd, SQL, redis
// commands...), never with the [tenure.Store] under test. A nil func skips
// the cases that need it.
type Tamper struct {
	// DeleteGrant deletes the key's current grant as the backend stores it
	// (the holder key, row, node or blob content), leaving the term counter
	// and any record of earlier grants alone.
	DeleteGrant func(t testing.TB, key string)
	// OverwriteGrant rewrites the key's current grant in place so that it
	// names identity (with a token of its own where the store keeps one),
	// keeping its term, as another tool writing the same data would.
	OverwriteGrant func(t testing.TB, key, identity string)
	// DeleteAll deletes everything the store keeps for the key: the grant,
	// the term counter and any record of the last grant. Nil for a store
	// whose terms cannot be deleted that way.
	DeleteAll func(t testing.TB, key string)
}

func (o *Options) defaults() {
	if o.TTL == 0 {
		o.TTL = time.Second
	}
	if o.Tolerance == 0 {
		o.Tolerance = 500 * time.Millisecond
	}
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, o Options) {
	o.defaults()
	s := &suite{o: o}
	t.Run("BadInput", s.badInput)
	t.Run("GetNeverGranted", s.getNeverGranted)
	t.Run("RaceOneWinner", s.raceOneWinner)
	t.Run("HeldErrorNamesHolder", s.heldErrorNamesHolder)
	t.Run("SameIdentityIsHeld", s.sameIdentityIsHeld)
	t.Run("ReleaseFreesAtOnce", s.releaseFreesAtOnce)
	t.Run("TermsIncreaseAcrossRelease", s.termsIncreaseAcrossRelease)
	t.Run("RenewExtends", s.renewExtends)
	t.Run("ExpiryWithinTolerance", s.expiryWithinTolerance)
	t.Run("StaleLeaseIsLost", s.staleLeaseIsLost)
	t.Run("ForgedLeaseIsLost", s.forgedLeaseIsLost)
	t.Run("KeysAreIndependent", s.keysAreIndependent)
	t.Run("ContextCancelled", s.contextCancelled)
	t.Run("Watch", s.watch)
	t.Run("PublishedValue", s.publishedValue)
	t.Run("Close", s.close)
	t.Run("GrantDeletedFromOutside", s.grantDeletedFromOutside)
	t.Run("GrantOverwrittenFromOutside", s.grantOverwrittenFromOutside)
	t.Run("TermCounterDeletedFromOutside", s.termCounterDeletedFromOutside)
	t.Run("Session", s.sessions)
	if o.Restart != nil {
		t.Run("TermsSurviveRestart", s.termsSurviveRestart)
	}
}

type suite struct{ o Options }

// long returns a TTL of k×TTL, capped at MaxTTL: for grants that must not
// expire during a case.
func (s *suite) long(k time.Duration) time.Duration {
	if s.o.MaxTTL > 0 {
		return min(s.o.TTL*k, s.o.MaxTTL)
	}
	return s.o.TTL * k
}

// open returns a handle closed at the end of the test.
func (s *suite) open(t *testing.T) tenure.Store {
	t.Helper()
	st := s.o.Open(t)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// Context returns a context that is done after d, or when t's test has
// ended (it is cancelled in t.Cleanup): a bound on a test's store calls.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// PastDeadline checks what a store does with a call made past its
// deadline while the context's timer has not fired yet, as on a busy
// machine (the context's Err is still nil): check, what the store checks
// before a call, and fail, what it makes of clientErr, the error its
// client returned, must both give an error matching
// [context.DeadlineExceeded].
func PastDeadline(t testing.TB, check func(context.Context) error, fail func(context.Context, error) error, clientErr error) {
	t.Helper()
	ctx := lagging{context.Background()}
	if err := check(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("check past the deadline: %v, want context.DeadlineExceeded", err)
	}
	if err := fail(ctx, clientErr); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("fail past the deadline: %v, want context.DeadlineExceeded", err)
	}
}

// lagging is a context whose deadline has passed while its timer has not
// fired yet: Err is still nil.
type lagging struct{ context.Context }

func (lagging) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// Key returns a key unique to this test run, safe on every store.
func Key(t testing.TB) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	if len(name) > 80 {
		name = name[len(name)-80:]
	}
	return "tenure-test/" + name + "-" + hex.EncodeToString(b[:])
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAcquire(t *testing.T, st tenure.Store, key, id string, ttl time.Duration) tenure.Lease {
	t.Helper()
	l, err := st.Acquire(ctxFor(t), key, id, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q, %q): %v", key, id, err)
	}
	if l.Key != key || l.Identity != id || l.Term == 0 || l.TTL != ttl {
		t.Fatalf("Acquire(%q, %q) = %+v: want key, identity, TTL %s and a term > 0", key, id, l, ttl)
	}
	return l
}

func mustGet(t *testing.T, st tenure.Store, key string) tenure.Record {
	t.Helper()
	r, err := st.Get(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if r.Key != key {
		t.Fatalf("Get(%q).Key = %q", key, r.Key)
	}
	return r
}

func wantHeld(t *testing.T, err error, holder string, term uint64) {
	t.Helper()
	var held *tenure.HeldError
	if !errors.Is(err, tenure.ErrHeld) || !errors.As(err, &held) {
		t.Fatalf("got error %v, want a *tenure.HeldError", err)
	}
	if held.Record.Holder != holder || held.Record.Term != term {
		t.Fatalf("HeldError record = %+v, want holder %q term %d", held.Record, holder, term)
	}
}

func wantLost(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("%s: got %v, want an error matching tenure.ErrLost", what, err)
	}
}

// granted opens two handles on the store and grants a fresh key to
// identity through the first, a, for ttl.
func (s *suite) granted(t *testing.T, identity string, ttl time.Duration) (a, b tenure.Store, l tenure.Lease) {
	t.Helper()
	a, b = s.open(t), s.open(t)
	return a, b, mustAcquire(t, a, Key(t), identity, ttl)
}

// wantStaleLost checks that Renew and then Release of l through st both
// fail with ErrLost; what ends their failure messages ("Renew " + what).
func wantStaleLost(t *testing.T, st tenure.Store, l tenure.Lease, what string) {
	t.Helper()
	wantLost(t, st.Renew(ctxFor(t), l), "Renew "+what)
	wantLost(t, st.Release(ctxFor(t), l), "Release "+what)
}

// wantHolder checks that st reads key as held by holder at term; calls
// names what must not have changed the record, for the failure message.
func wantHolder(t *testing.T, st tenure.Store, key, holder string, term uint64, calls string) {
	t.Helper()
	if r := mustGet(t, st, key); r.Holder != holder || r.Term != term {
		t.Fatalf("%s changed the record: %+v, want %s holding term %d", calls, r, holder, term)
	}
}
