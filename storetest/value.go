package storetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
)

// publishedValue checks a [tenure.Publisher]: the value published with a
// grant round-trips through AcquireClaim, Get, Watch and the HeldError of
// a rival, and is gone once the grant is released. Stores that are not
// Publishers skip it.
func (s *suite) publishedValue(t *testing.T) {
	a, b := s.open(t), s.open(t)
	pa, ok := a.(tenure.Publisher)
	if !ok {
		t.Skipf("%T is not a tenure.Publisher", a)
	}
	key := Key(t)
	ctx, cancel := context.WithCancel(ctxFor(t))
	defer cancel()
	ch, err := b.Watch(ctx, key)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	next := func(what string, want func(tenure.Record) bool) tenure.Record {
		t.Helper()
		return Await(t, ch, s.o.Tolerance, what, want)
	}
	next("the initial free record", func(r tenure.Record) bool { return !r.Held() })
	s.badValues(t, pa, key)

	// A value with what some backends must encode: spaces, '=', ',', ';',
	// quotes, '/', non-ASCII.
	const value = `http://10.0.0.7:8080/a b=c,d;"é" ünï`
	l, err := pa.AcquireClaim(ctxFor(t), key, tenure.Claim{Identity: "alpha", TTL: s.long(10), Value: value})
	if err != nil {
		t.Fatalf("AcquireClaim: %v", err)
	}
	if l.Value != value {
		t.Errorf("AcquireClaim's lease has Value %q, want %q", l.Value, value)
	}
	if r := mustGet(t, b, key); r.Holder != "alpha" || r.Value != value {
		t.Errorf("Get = %+v, want holder alpha with Value %q", r, value)
	}
	next("the acquisition with its value", func(r tenure.Record) bool {
		return r.Holder == "alpha" && r.Term == l.Term && r.Value == value
	})
	_, err = b.Acquire(ctxFor(t), key, "beta", s.o.TTL)
	if held, ok := errors.AsType[*tenure.HeldError](err); !ok {
		t.Errorf("rival Acquire: got %v, want a *tenure.HeldError", err)
	} else if held.Record.Value != value {
		t.Errorf("rival's HeldError record has Value %q, want %q", held.Record.Value, value)
	}
	// Renewing keeps the value.
	if err := pa.Renew(ctxFor(t), l); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if r := mustGet(t, b, key); r.Value != value {
		t.Errorf("after Renew, Get has Value %q, want %q", r.Value, value)
	}
	if err := pa.Release(ctxFor(t), l); err != nil {
		t.Fatalf("Release: %v", err)
	}
	next("the release, without the value", func(r tenure.Record) bool { return !r.Held() && r.Term == l.Term && r.Value == "" })
	if r := mustGet(t, b, key); r.Held() || r.Value != "" {
		t.Errorf("after Release, Get = %+v, want free with no Value", r)
	}

	// A plain Acquire publishes nothing, even after a grant that did.
	l2 := mustAcquire(t, a, key, "gamma", s.long(10))
	if l2.Value != "" {
		t.Errorf("plain Acquire's lease has Value %q, want none", l2.Value)
	}
	next("the plain acquisition, without a value", func(r tenure.Record) bool { return r.Holder == "gamma" && r.Term == l2.Term })
	if r := mustGet(t, b, key); r.Value != "" {
		t.Errorf("after a plain Acquire, Get has Value %q, want none", r.Value)
	}
	if err := a.Release(ctxFor(t), l2); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// badValues checks that claims with bad values are refused and grant
// nothing.
func (s *suite) badValues(t *testing.T, pa tenure.Publisher, key string) {
	t.Helper()
	for name, v := range map[string]string{
		"over-long value":            strings.Repeat("v", tenure.MaxValueLen+1),
		"control character in value": "10.0.0.7\n:8080",
		"invalid UTF-8 value":        "10.0.0.7\xff",
	} {
		_, err := pa.AcquireClaim(ctxFor(t), key, tenure.Claim{Identity: "alpha", TTL: s.o.TTL, Value: v})
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("AcquireClaim with %s: got %v, want an error matching tenure.ErrInvalid", name, err)
		}
	}
	if r := mustGet(t, pa, key); r.Held() || r.Term != 0 {
		t.Fatalf("after rejected claims, Get = %+v, want a never-granted key", r)
	}
}
