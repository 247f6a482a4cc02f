package compare

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/tenurehq/tenure/internal/testserver"
)

// kubeScaleMax is the largest N client-go and tenure's k8s store are
// measured at: each key is a Lease renewed on its own (the API has no
// shared session), so 10,000 keys would be thousands of writes per second
// on one API server.
const kubeScaleMax = 1000

// kubeScale starts a kube-apiserver for TestScale.
func kubeScale(t *testing.T) scaleStore {
	srv := testserver.Kube(t)
	kc := srv.Kubeconfig(t, srv.AdminToken)
	return scaleStore{name: "kubernetes", url: "k8s://default?kubeconfig=" + url.QueryEscape(kc),
		requests: leaseRequests(srv), kubeconfig: kc, maxN: kubeScaleMax}
}

// measureClientGo leads n Leases from one process with client-go's
// leaderelection, one LeaderElector per Lease on one client, timings
// scaled to the TTL as in the kubernetes pair, and measures the idle
// window.
func measureClientGo(ctx context.Context, s scaleStore, n int, idle time.Duration) (scaleResult, error) {
	r := scaleResult{store: s.name, mode: "client-go leaderelection, one Lease per key", n: n, base: memNow()}
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		return r, err
	}
	cfg.QPS, cfg.Burst = 5000, 5000 // one client for every key: do not throttle it
	client, err := coordinationclient.NewForConfig(cfg)
	if err != nil {
		return r, err
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	var led atomic.Int64
	all := make(chan struct{})
	prefix := fmt.Sprintf("scale-clientgo-%d-%d", n, time.Now().UnixNano())
	begin := time.Now()
	for i := range n {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: "default"},
				Client:     client,
				LockConfig: resourcelock.ResourceLockConfig{Identity: "p1"},
			},
			LeaseDuration: scaleTTL, RenewDeadline: scaleTTL * 2 / 3, RetryPeriod: scaleTTL * 2 / 15,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					if led.Add(1) == int64(n) {
						close(all)
					}
				},
				OnStoppedLeading: func() {},
			},
		})
		if err != nil {
			return r, err
		}
		wg.Go(func() { le.Run(runCtx) })
	}
	err = waitAll(ctx, all, &led, n, 3*time.Minute)
	r.elect = time.Since(begin)
	if err != nil && ctx.Err() == nil {
		r.note = err.Error() // a result: this many keys is past what it can lead
		return r, nil
	}
	if err != nil {
		return r, err
	}
	return r, measureIdle(ctx, s, idle, &r)
}
