package k8s_test

import (
	"context"
	"fmt"

	"github.com/tenurehq/tenure/store/k8s"
)

// A key that is a valid object name is the Lease's name, so tenure and
// client-go candidates that use that name share one Lease; other keys get
// a readable name and a hash. The namespace comes from the URL, else from
// the kubeconfig context (or, in a pod, from its service account).
func ExampleStore_LeaseName() {
	st, err := k8s.Open(context.Background(), "k8s://?kubeconfig=testdata/kubeconfig")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	fmt.Println(st.Namespace())
	fmt.Println(st.LeaseName("report-leader"))
	fmt.Println(st.LeaseName("Jobs/Nightly Report"))
	// Output:
	// jobs
	// report-leader
	// jobs-nightly-report-de32bb1c74
}
