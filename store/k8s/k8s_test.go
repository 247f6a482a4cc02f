package k8s_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/k8s"
	"github.com/tenurehq/tenure/storetest"
)

// env is one API server shared by the tests of a top-level test.
type env struct {
	srv   *testserver.KubeServer
	admin string // kubeconfig with the admin token
	raw   kubernetes.Interface
}

func start(t testing.TB) *env {
	t.Helper()
	srv := testserver.Kube(t)
	e := &env{srv: srv, admin: srv.Kubeconfig(t, srv.AdminToken)}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	if e.raw, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return e
}

// url is the store URL for prefix in namespace default.
func (e *env) url(prefix, kubeconfig string) string {
	return "k8s://default/" + prefix + "?kubeconfig=" + url.QueryEscape(kubeconfig)
}

// openOn returns an opener of handles, each with its own client, as
// separate processes would have.
func (e *env) openOn(prefix string) func(t testing.TB) tenure.Store {
	return func(t testing.TB) tenure.Store {
		t.Helper()
		return storetest.OpenClosing(t, tenure.Open, e.url(prefix, e.admin))
	}
}

// leaseNamed reads the Lease for key with the admin client.
func (e *env) lease(t testing.TB, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := e.raw.CoordinationV1().Leases("default").Get(storetest.Context(t, 10*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Lease %s: %v", name, err)
	}
	return l
}

// tamper changes Leases with the admin client, as kubectl edit or another
// controller would.
func (e *env) tamper(prefix string) *storetest.Tamper {
	names, err := k8s.Open(context.Background(), e.url(prefix, e.admin))
	if err != nil {
		panic(err)
	}
	edit := func(t testing.TB, key string, change func(*coordinationv1.Lease)) {
		t.Helper()
		l := e.lease(t, names.LeaseName(key))
		change(l)
		if _, err := e.raw.CoordinationV1().Leases("default").Update(storetest.Context(t, 10*time.Second), l, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("tamper: %v", err)
		}
	}
	return &storetest.Tamper{
		DeleteGrant: func(t testing.TB, key string) {
			edit(t, key, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = nil })
		},
		OverwriteGrant: func(t testing.TB, key, id string) {
			edit(t, key, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = &id })
		},
		DeleteAll: func(t testing.TB, key string) {
			err := e.raw.CoordinationV1().Leases("default").Delete(storetest.Context(t, 10*time.Second), names.LeaseName(key), metav1.DeleteOptions{})
			if err != nil {
				t.Fatalf("tamper: delete: %v", err)
			}
		},
	}
}

// TestAgainstKubeAPIServer runs everything that needs an API server on
// one, since each takes seconds to start.
func TestAgainstKubeAPIServer(t *testing.T) {
	e := start(t)
	t.Run("Conformance", func(t *testing.T) {
		storetest.Run(t, storetest.Options{
			Open:      e.openOn("conf."),
			TTL:       time.Second,
			Tolerance: 750 * time.Millisecond,
			Tamper:    e.tamper("conf."),
			Restart: func(t testing.TB) {
				if err := e.srv.Restart(); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
	t.Run("ClientGoReadsTheRecord", func(t *testing.T) { clientGoReadsTheRecord(t, e) })
	t.Run("TermsSurviveClientGoGrants", func(t *testing.T) { termsSurviveClientGoGrants(t, e) })
	t.Run("TermsAtMaximum", func(t *testing.T) { termsAtMaximum(t, e) })
	t.Run("AnnotationWithoutKey", func(t *testing.T) { annotationWithoutKey(t, e) })
	t.Run("ForgedGrantTTL", func(t *testing.T) { forgedGrantTTL(t, e) })
	t.Run("NewerFormat", func(t *testing.T) { newerFormat(t, e) })
	t.Run("RBACRoleOfTheREADME", func(t *testing.T) { rbacRole(t, e) })
	// Last: it stops the API server for a while.
	t.Run("Outage", func(t *testing.T) { outage(t, e) })
}

// outage: with the API server stopped, calls fail and watches close; once
// it is back, the grant made before is still the holder's (etcd kept it).
func outage(t *testing.T, e *env) {
	st := e.openOn("outage.")(t)
	l := storetest.Outage(t, st, "job", e.srv.Stop)
	if err := e.srv.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := storetest.Context(t, 30*time.Second)
	if err := st.Renew(ctx, l); err != nil {
		t.Fatalf("Renew once the API server is back: %v", err)
	}
	if r, err := st.Get(ctx, "job"); err != nil || r.Holder != "alpha" || r.Term != l.Term {
		t.Fatalf("Get once the API server is back = %+v, %v", r, err)
	}
}

// clientGoReadsTheRecord: a grant, a renewal and a release, read back
// through client-go's own LeaseLock.
func clientGoReadsTheRecord(t *testing.T, e *env) {
	st := e.openOn("")(t)
	ctx := storetest.Context(t, 30*time.Second)
	lock := &resourcelock.LeaseLock{
		LeaseMeta: metav1.ObjectMeta{Namespace: "default", Name: "shared-lock"},
		Client:    e.raw.CoordinationV1(),
	}
	l, err := st.Acquire(ctx, "shared-lock", "tenure-a", 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, err := lock.Get(ctx)
	if err != nil {
		t.Fatalf("client-go LeaseLock.Get: %v", err)
	}
	if rec.HolderIdentity != "tenure-a" || rec.LeaseDurationSeconds != 3 || rec.AcquireTime.IsZero() || rec.RenewTime.IsZero() {
		t.Fatalf("client-go reads %+v: want holder tenure-a, leaseDurationSeconds 3 (1.5 s rounded up, plus 1)", rec)
	}
	before := rec.RenewTime
	time.Sleep(1100 * time.Millisecond) // renewTime has whole-second resolution in client-go
	if err := st.Renew(ctx, l); err != nil {
		t.Fatal(err)
	}
	rec, _, err = lock.Get(ctx)
	if err != nil || !rec.RenewTime.After(before.Time) || rec.LeaderTransitions != 0 {
		t.Fatalf("after Renew client-go reads %+v, %v: want a later renewTime, same transitions", rec, err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	rec, _, err = lock.Get(ctx)
	if err != nil || rec.HolderIdentity != "" {
		t.Fatalf("after Release client-go reads %+v, %v: want no holder", rec, err)
	}
	l2, err := st.Acquire(ctx, "shared-lock", "tenure-b", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec, _, _ = lock.Get(ctx)
	if l2.Term != l.Term+1 || rec.LeaderTransitions != 1 || rec.HolderIdentity != "tenure-b" {
		t.Fatalf("second grant: term %d after %d, client-go reads %+v: want the next term and one transition", l2.Term, l.Term, rec)
	}
}

// termsSurviveClientGoGrants: client-go's LeaseLock takes a released Lease
// and later gives it up; tenure's next term is above every grant counted.
func termsSurviveClientGoGrants(t *testing.T, e *env) {
	st := e.openOn("")(t)
	ctx := storetest.Context(t, 30*time.Second)
	l, err := st.Acquire(ctx, "mixed-terms", "tenure-a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: "default", Name: "mixed-terms"},
		Client:     e.raw.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: "client-go-x"},
	}
	rec, _, err := lock.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	// What client-go's elector writes when it takes a free Lease.
	take := resourcelock.LeaderElectionRecord{HolderIdentity: "client-go-x", LeaseDurationSeconds: 1,
		AcquireTime: now, RenewTime: now, LeaderTransitions: rec.LeaderTransitions + 1}
	if err := lock.Update(ctx, take); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, "mixed-terms")
	if err != nil || r.Holder != "client-go-x" || r.Term != l.Term+1 {
		t.Fatalf("Get of the client-go grant = %+v, %v: want holder client-go-x term %d", r, err, l.Term+1)
	}
	_, err = st.Acquire(ctx, "mixed-terms", "tenure-b", time.Second)
	if !errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire over a fresh client-go grant: %v, want ErrHeld", err)
	}
	// client-go's release: no holder, leaseDurationSeconds 1.
	take.HolderIdentity, take.RenewTime = "", metav1.Now()
	if err := lock.Update(ctx, take); err != nil {
		t.Fatal(err)
	}
	l2, err := st.Acquire(ctx, "mixed-terms", "tenure-b", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Term != l.Term+2 || l2.Wait != 0 {
		t.Fatalf("grant after a client-go release = term %d wait %s: want term %d, no wait", l2.Term, l2.Wait, l.Term+2)
	}
}

// rbacRole: the Role the README gives is enough for every call, and
// without it the errors say Forbidden and never quote the token.
func rbacRole(t *testing.T, e *env) {
	user := e.srv.Kubeconfig(t, e.srv.UserToken)
	ctx := storetest.Context(t, 30*time.Second)
	st, err := tenure.Open(ctx, e.url("rbac.", user))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = st.Acquire(ctx, "job", "pod-1", time.Second)
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Acquire without a Role: %v, want forbidden", err)
	}
	if strings.Contains(err.Error(), e.srv.UserToken) {
		t.Fatalf("the error quotes the bearer token: %v", err)
	}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "tenure", Namespace: "default"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"coordination.k8s.io"},
			Resources: []string{"leases"},
			Verbs:     []string{"get", "list", "watch", "create", "update"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenure", Namespace: "default"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: testserver.KubeUser, APIGroup: "rbac.authorization.k8s.io"}},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "tenure", APIGroup: "rbac.authorization.k8s.io"},
	}
	if _, err := e.raw.RbacV1().Roles("default").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.raw.RbacV1().RoleBindings("default").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC changes take effect within moments.
	var l tenure.Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		if l, err = st.Acquire(ctx, "job", "pod-1", time.Second); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Acquire with the README's Role: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w, err := st.Watch(ctx, "job")
	if err != nil {
		t.Fatalf("Watch with the README's Role: %v", err)
	}
	if r := <-w; r.Holder != "pod-1" {
		t.Fatalf("watch delivered %+v", r)
	}
	if err := st.Renew(ctx, l); err != nil {
		t.Fatalf("Renew with the README's Role: %v", err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatalf("Release with the README's Role: %v", err)
	}
	if r := <-w; r.Held() {
		t.Fatalf("watch after Release delivered %+v", r)
	}
}

// BenchmarkFailover measures graceful handoff and crash failover through
// real electors. Run it with -run '^$' -bench Failover -benchtime 1x.
func BenchmarkFailover(b *testing.B) {
	e := start(b)
	res := storetest.BenchFailover(b, storetest.BenchOptions{
		Open:   e.openOn("bench."),
		TTL:    2 * time.Second,
		Trials: 20,
	})
	slices.Sort(res.Graceful)
	slices.Sort(res.Crash)
	b.Logf("graceful handoffs, sorted: %v", res.Graceful)
	b.Logf("crash failovers, sorted: %v", res.Crash)
}
