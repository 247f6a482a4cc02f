package k8s

import (
	"context"
	"testing"
)

// In a pod, a candidate campaigns under the pod's name unless told
// otherwise; elsewhere the store has no preference.
func TestDefaultsToPodName(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	st, err := Open(context.Background(), "k8s://jobs?kubeconfig=testdata/kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t.Setenv("POD_NAME", "report-7d9f-x2x4q")
	if id, ttl := st.Defaults(); id != "report-7d9f-x2x4q" || ttl != 0 {
		t.Fatalf("Defaults() = %q, %s; want the pod name and no TTL preference", id, ttl)
	}
	t.Setenv("POD_NAME", "")
	if id, _ := st.Defaults(); id != "" {
		t.Fatalf("Defaults() without POD_NAME = %q, want none", id)
	}
}
