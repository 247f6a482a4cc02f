package k8s_test

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/k8s"
	"github.com/tenurehq/tenure/storetest"
)

// termsAtMaximum: a released key's term in the grant annotation is set
// with kubectl to the largest uint64, or just below it with the Lease's
// leaseTransitions raised so that the term tenure derives passes it. The
// next grant's term would wrap to a small one, below every term handed
// out, so the store must refuse to grant instead.
func termsAtMaximum(t *testing.T, e *env) {
	for _, tc := range []struct {
		name  string
		term  uint64
		trans int32 // added to leaseTransitions
	}{
		{"Annotation", math.MaxUint64, 0},
		{"Transitions", math.MaxUint64 - 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := storetest.Context(t, 30*time.Second)
			st := storetest.OpenClosing(t, k8s.Open, e.url("maxterm.", e.admin))
			key := strings.ToLower(tc.name)
			l, err := st.Acquire(ctx, key, "alpha", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Release(ctx, l); err != nil {
				t.Fatal(err)
			}
			lease := e.lease(t, st.LeaseName(key))
			var g map[string]any
			if err := json.Unmarshal([]byte(lease.Annotations[k8s.GrantAnnotation]), &g); err != nil {
				t.Fatal(err)
			}
			g["term"] = json.Number(strconv.FormatUint(tc.term, 10))
			b, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			lease.Annotations[k8s.GrantAnnotation] = string(b)
			lease.Spec.LeaseTransitions = ptr(*lease.Spec.LeaseTransitions + tc.trans)
			if _, err := e.raw.CoordinationV1().Leases("default").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			r, err := st.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if r.Term < tc.term {
				t.Fatalf("Get after the annotation's term was set to %d shows term %d", tc.term, r.Term)
			}
			if l2, err := st.Acquire(ctx, key, "beta", time.Second); err == nil {
				t.Fatalf("Acquire after term %d granted term %d", r.Term, l2.Term)
			} else if !errors.Is(err, tenure.ErrTermsExhausted) || !strings.Contains(err.Error(), "largest") {
				t.Fatalf("Acquire after term %d: %v, want ErrTermsExhausted saying no greater term exists", r.Term, err)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// annotationWithoutKey: a held key's grant annotation is rewritten with
// kubectl to one that names no key ({"term":1}). Every call answers one
// line naming the key that says the annotation names none, instead of
// calling the Lease another key's (key ""), and the holder's Renew
// reports the grant lost.
func annotationWithoutKey(t *testing.T, e *env) {
	ctx := storetest.Context(t, 30*time.Second)
	st := storetest.OpenClosing(t, k8s.Open, e.url("nokey.", e.admin))
	l, err := st.Acquire(ctx, "job", "alpha", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lease := e.lease(t, st.LeaseName("job"))
	lease.Annotations[k8s.GrantAnnotation] = `{"term":1}`
	if _, err := e.raw.CoordinationV1().Leases("default").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	storetest.Tampered(t, "Renew", st.Renew(ctx, l), "job", tenure.ErrLost)
	_, err = st.Get(ctx, "job")
	storetest.Tampered(t, "Get", err, "job", nil, "another key", `key ""`)
	_, err = st.Acquire(ctx, "job", "beta", 10*time.Second)
	storetest.Tampered(t, "Acquire", err, "job", nil, "another key", `key ""`)
	if !strings.Contains(err.Error(), "names no key") {
		t.Fatalf("Acquire: %v; want it to say the annotation names no key", err)
	}
}

// forgedGrantTTL: a held key's grant annotation is edited with kubectl to
// a TTL of 1 ns, 0 or less, leaving the Lease's leaseDurationSeconds as
// the holder last wrote it. The holder's Renew reports the grant lost; but
// no other candidate may take the key before the holder's renew window,
// counted from its last renewal with its real TTL, has closed: a
// candidate that judged expiry by the forged TTL took the key 20 ms after
// the edit, with no Wait, while the holder still led.
func forgedGrantTTL(t *testing.T, e *env) {
	for name, forged := range map[string]int64{"one": 1, "zero": 0, "negative": -1} {
		t.Run(name, func(t *testing.T) {
			ctx := storetest.Context(t, 30*time.Second)
			a := storetest.OpenClosing(t, k8s.Open, e.url("ttl.", e.admin))
			b := storetest.OpenClosing(t, k8s.Open, e.url("ttl.", e.admin))
			key := "forged-" + name
			l, err := a.Acquire(ctx, key, "alpha", 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			// b campaigns, as a candidate waiting for the key does.
			if _, err := b.Acquire(ctx, key, "beta", 10*time.Second); !errors.Is(err, tenure.ErrHeld) {
				t.Fatalf("Acquire of the held key: %v, want ErrHeld", err)
			}
			renewSent := time.Now()
			if err := a.Renew(ctx, l); err != nil {
				t.Fatal(err)
			}
			lease := e.lease(t, a.LeaseName(key))
			var g map[string]any
			if err := json.Unmarshal([]byte(lease.Annotations[k8s.GrantAnnotation]), &g); err != nil {
				t.Fatal(err)
			}
			g["ttlNanos"] = forged
			raw, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			lease.Annotations[k8s.GrantAnnotation] = string(raw)
			if _, err := e.raw.CoordinationV1().Leases("default").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			// For a second, far longer than the 20 ms a forged TTL of
			// nothing leaves, b keeps campaigning.
			for until := time.Now().Add(time.Second); time.Now().Before(until); {
				acqSent := time.Now()
				l2, err := b.Acquire(ctx, key, "beta", 10*time.Second)
				if err == nil {
					if start, deadline := acqSent.Add(l2.Wait), renewSent.Add(l.TTL); start.Before(deadline) {
						t.Fatalf("with the annotation's ttlNanos set to %d, another candidate was granted the key %s before the holder's renew deadline (Wait %s)",
							forged, deadline.Sub(start).Round(time.Millisecond), l2.Wait)
					}
					break
				}
				if !errors.Is(err, tenure.ErrHeld) {
					t.Fatalf("Acquire: %v", err)
				}
			}
		})
	}
}
