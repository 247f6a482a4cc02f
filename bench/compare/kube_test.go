package compare

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

func init() { klog.SetLogger(logr.Discard()) } // leaderelection logs every attempt

// kubeContender runs client-go's tools/leaderelection with a LeaseLock on
// one fake clientset, which stands in for the API server (there is no
// kube-apiserver here). Its defaults (15 s / 10 s / 2 s) are scaled to the
// TTL: LeaseDuration = TTL, RenewDeadline = 2/3 TTL, RetryPeriod = TTL/7.5;
// ReleaseOnCancel is on.
type kubeContender struct {
	cs  *fake.Clientset
	ttl time.Duration
}

// requests counts the API requests the fake clientset has recorded.
func (c *kubeContender) requests(context.Context) (int64, error) {
	return int64(len(c.cs.Actions())), nil
}

func (c *kubeContender) Start(ctx context.Context, key, id string, onLead func()) (candidate, error) {
	leases := &crashableLeases{LeasesGetter: c.cs.CoordinationV1()}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: key, Namespace: "default"},
			Client:     leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration:   c.ttl,
		RenewDeadline:   c.ttl * 2 / 3,
		RetryPeriod:     c.ttl * 2 / 15,
		ReleaseOnCancel: true,
		Name:            key,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { onLead() },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	kc := &kubeCandidate{leases: leases, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(kc.done)
		le.Run(runCtx)
	}()
	return kc, nil
}

type kubeCandidate struct {
	leases *crashableLeases
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Release cancels the elector's context: with ReleaseOnCancel it writes an
// empty holder, as client-go's users shut down.
func (c *kubeCandidate) Release() { c.cancel() }

// Crash fails every later request of this candidate, then cancels it, so
// neither renewals nor the release on cancel reach the API.
func (c *kubeCandidate) Crash() {
	c.leases.crashed.Store(true)
	c.cancel()
}

func (c *kubeCandidate) Stop() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}

// crashableLeases passes Lease requests to the fake clientset until crashed.
type crashableLeases struct {
	coordinationclient.LeasesGetter
	crashed atomic.Bool
}

func (c *crashableLeases) Leases(namespace string) coordinationclient.LeaseInterface {
	return crashableLeaseClient{c.LeasesGetter.Leases(namespace), &c.crashed}
}

type crashableLeaseClient struct {
	coordinationclient.LeaseInterface
	crashed *atomic.Bool
}

func (c crashableLeaseClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error) {
	if c.crashed.Load() {
		return nil, errCrashed
	}
	return c.LeaseInterface.Get(ctx, name, opts)
}

func (c crashableLeaseClient) Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if c.crashed.Load() {
		return nil, errCrashed
	}
	return c.LeaseInterface.Create(ctx, l, opts)
}

func (c crashableLeaseClient) Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if c.crashed.Load() {
		return nil, errCrashed
	}
	return c.LeaseInterface.Update(ctx, l, opts)
}
