// Package k8smix runs a mixed fleet on one Kubernetes Lease: real
// client-go tools/leaderelection candidates and tenure candidates
// (store/k8s) contending against a real kube-apiserver, with kills,
// graceful releases and frozen holders, and checks from both sides' own
// logs that no two leaders ever led at once. It is its own Go module so
// that client-go's leaderelection package never enters tenure's go.mod.
//
// Run it with: cd bench/k8smix && go test -race -count=1 -v .
// (needs .ci/kube-apiserver and the apt etcd-server package; skipped
// without them outside CI).
package k8smix
