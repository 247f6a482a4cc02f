package redis_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
)

// A lease hash written by a newer tenure, which this build cannot read,
// is never taken for a free key (a second leader) nor read as a lower
// term: Acquire and Get refuse it in one line naming the key and what
// they found, for as long as it lives, and the key is granted again once
// it is gone (deleted or expired). Found in a rolling-upgrade audit: a
// lease hash without a holder field read as free, so Acquire replaced a
// live grant of a format that dropped or renamed the field.
func TestNewerFormatLeaseRefused(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	c := client(t, srv)
	cases := map[string]struct {
		fields []any
		want   string
	}{
		"format 99": {[]any{"format", "99", "holder", "v99", "term", "7", "token", "t", "ttl_ns", "10000000000", "ttl_ms", "10000"},
			`format "99"`},
		"no holder field": {[]any{"format", "1", "owner", "v99", "term", "7", "token", "t", "ttl_ms", "10000"},
			"no holder field"},
		"no holder, no format": {[]any{"owner", "v99", "term", "7", "token", "t", "ttl_ms", "10000"},
			"no holder field"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			key := randomKey()
			lease := recordKey(key, "lease")
			if err := c.HSet(ctxFor(t), lease, tc.fields...).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.PExpire(ctxFor(t), lease, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			l, err := st.Acquire(ctxFor(t), key, "old", time.Second)
			var held *tenure.HeldError
			if err == nil || errors.As(err, &held) {
				t.Fatalf("Acquire over a %s lease hash: lease %+v, err %v; want a refusal", name, l, err)
			}
			checkRefusal(t, err, key, lease, tc.want)
			r, err := st.Get(ctxFor(t), key)
			if err == nil {
				t.Fatalf("Get of a %s lease hash: %+v, want a refusal", name, r)
			}
			checkRefusal(t, err, key, lease, tc.want)
			if err := c.Del(ctxFor(t), lease).Err(); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Acquire(ctxFor(t), key, "old", time.Second); err != nil {
				t.Fatalf("Acquire once the newer grant is gone: %v", err)
			}
		})
	}
}

func checkRefusal(t *testing.T, err error, key, lease, want string) {
	t.Helper()
	msg := err.Error()
	for _, s := range []string{`"` + key + `"`, lease, want} {
		if !strings.Contains(msg, s) || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line naming %q", msg, s)
		}
	}
}

// A grant of this build carries format 1, and a lease hash without the
// field (every grant of builds before it) still reads as before: held by
// its holder at its term.
func TestFormatFieldWrittenAndOptional(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	c := client(t, srv)
	l, lease := heldKey(t, st)
	if f, err := c.HGet(ctxFor(t), lease, "format").Result(); err != nil || f != "1" {
		t.Fatalf("format field of a new grant: %q, %v; want \"1\"", f, err)
	}
	if err := c.HDel(ctxFor(t), lease, "format").Err(); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctxFor(t), l.Key)
	if err != nil || r.Holder != "alpha" || r.Term != l.Term {
		t.Fatalf("Get of a grant without the format field: %+v, %v; want alpha at term %d", r, err, l.Term)
	}
	_, err = st.Acquire(ctxFor(t), l.Key, "beta", time.Second)
	var held *tenure.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "alpha" {
		t.Fatalf("Acquire over a grant without the format field: %v, want held by alpha", err)
	}
	if err := st.Renew(ctxFor(t), l); err != nil {
		t.Fatalf("Renew of a grant without the format field: %v", err)
	}
	if err := st.Release(ctxFor(t), l); err != nil {
		t.Fatalf("Release of a grant without the format field: %v", err)
	}
}

// TestRecordFieldsPinned pins the fields a plain grant writes. If it
// fails, the record changed: builds already deployed read it (a rolling
// upgrade runs both on one server). Write another leaseFormat if an older
// build would misread the new record, then update the lists.
func TestRecordFieldsPinned(t *testing.T) {
	srv := testserver.Redis(t, false)
	st := open(t, srv.URL(0))
	c := client(t, srv)
	l, lease := heldKey(t, st)
	for name, want := range map[string]string{
		lease:                    "format holder term token ttl_ms ttl_ns value",
		recordKey(l.Key, "last"): "exp_ms released session term ttl_ms",
	} {
		m, err := c.HGetAll(ctxFor(t), name).Result()
		if err != nil {
			t.Fatal(err)
		}
		fields := make([]string, 0, len(m))
		for f := range m {
			fields = append(fields, f)
		}
		slices.Sort(fields)
		if got := strings.Join(fields, " "); got != want {
			t.Errorf("fields of %s: %s, want %s", name, got, want)
		}
	}
}
