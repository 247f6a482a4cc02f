package k8s_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/k8s"
	"github.com/tenurehq/tenure/storetest"
)

// newerFormat: a held key's grant annotation rewritten as a hypothetical
// newer tenure would write it, of format 99 with its term under another
// name. This build read such an annotation as none at all, a Lease only
// client-go wrote, at term leaseTransitions+1: here term 2, below the
// grant's 500, so Acquire after its expiry would have granted a term the
// key had already passed. Get, Acquire and the holder's Renew now refuse
// it in one line naming the key and the format. A grant of this build
// writes format 1, and an annotation without it, as earlier builds wrote
// it, reads as before.
func newerFormat(t *testing.T, e *env) {
	ctx := storetest.Context(t, 30*time.Second)
	st := storetest.OpenClosing(t, k8s.Open, e.url("newer.", e.admin))
	l, err := st.Acquire(ctx, "job", "v1", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lease := e.lease(t, st.LeaseName("job"))
	if a := lease.Annotations[k8s.GrantAnnotation]; !strings.Contains(a, `"format":1`) {
		t.Fatalf("annotation of a grant of this build: %s; want format 1", a)
	}
	// The annotation as builds before the format wrote it still reads.
	lease.Annotations[k8s.GrantAnnotation] = strings.Replace(lease.Annotations[k8s.GrantAnnotation], `,"format":1`, "", 1)
	if strings.Contains(lease.Annotations[k8s.GrantAnnotation], "format") {
		t.Fatalf("annotation still names a format: %s", lease.Annotations[k8s.GrantAnnotation])
	}
	lease, err = e.raw.CoordinationV1().Leases("default").Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := st.Get(ctx, "job"); err != nil || r.Holder != "v1" || r.Term != l.Term {
		t.Fatalf("Get of a grant annotated without a format: %+v, %v; want held by v1 at term %d", r, err, l.Term)
	}
	lease.Annotations[k8s.GrantAnnotation] = `{"format":99,"key":"job","generation":500,"holder":"v99"}`
	if _, err := e.raw.CoordinationV1().Leases("default").Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, "job")
	if err == nil {
		t.Fatalf("Get of a Lease of format 99: %+v; want a refusal", r)
	}
	storetest.Tampered(t, "Get", err, "job", nil)
	_, err = st.Acquire(ctx, "job", "v1", 10*time.Second)
	var held *tenure.HeldError
	if errors.As(err, &held) {
		t.Fatalf("Acquire of a Lease of format 99: %v; want a refusal", err)
	}
	storetest.Tampered(t, "Acquire", err, "job", nil)
	if !strings.Contains(err.Error(), "format 99") {
		t.Fatalf("Acquire: %v; want it to name format 99", err)
	}
	storetest.Tampered(t, "Renew", st.Renew(ctx, l), "job", tenure.ErrLost)
}
