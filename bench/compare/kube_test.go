package compare

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/tenurehq/tenure/internal/testserver"
	_ "github.com/tenurehq/tenure/store/k8s"
)

func init() { klog.SetLogger(logr.Discard()) } // leaderelection logs every attempt

// kubePair is the kubernetes pair: tenure store/k8s and client-go's
// leaderelection on Leases of one real kube-apiserver (with its own etcd),
// each candidate with a client of its own, as separate pods would have.
func kubePair(t *testing.T, p params) ([2]side, string) {
	srv := testserver.Kube(t)
	kc := srv.Kubeconfig(t, srv.AdminToken)
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 50, 100 // as store/k8s sets it; client-go's default 5 would throttle RetryPeriod polling
	count := leaseRequests(srv)
	kube := &kubeContender{cfg: cfg, ttl: p.ttl}
	return [2]side{
		{name: "tenure store/k8s", poll: 0, requests: count,
			c: &tenureContender{ttl: p.ttl, open: openURL("k8s://default?kubeconfig=" + url.QueryEscape(kc))}},
		{name: "client-go leaderelection", poll: p.ttl * 2 / 15, requests: count, c: kube},
	}, fmt.Sprintf("kubernetes: tenure store/k8s vs k8s.io/client-go v0.37.2 tools/leaderelection with a LeaseLock, one real kube-apiserver %s on etcd 3.4 (both in child processes), LeaseDuration TTL, RenewDeadline 2/3 TTL, RetryPeriod TTL/7.5, ReleaseOnCancel; requests = the API server's apiserver_request_total for leases", testserver.KubeVersion)
}

// leaseRequests returns a counter of the requests on leases the API server
// has served, from its own metrics.
func leaseRequests(srv *testserver.KubeServer) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		ca, err := os.ReadFile(srv.CAFile)
		if err != nil {
			return 0, err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca)
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.Host+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+srv.AdminToken)
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var total float64
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="leases"`) {
				continue
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err == nil {
				total += v
			}
		}
		return int64(total), sc.Err()
	}
}

// kubeContender runs client-go's tools/leaderelection with a LeaseLock on
// a real API server. Its defaults (15 s / 10 s / 2 s) are scaled to the
// TTL: LeaseDuration = TTL, RenewDeadline = 2/3 TTL, RetryPeriod = TTL/7.5;
// ReleaseOnCancel is on.
type kubeContender struct {
	cfg *rest.Config
	ttl time.Duration
}

func (c *kubeContender) Start(ctx context.Context, key, id string, onLead func()) (candidate, error) {
	client, err := coordinationclient.NewForConfig(c.cfg) // a client per candidate
	if err != nil {
		return nil, err
	}
	leases := &crashableLeases{LeasesGetter: client}
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

// crashableLeases passes Lease requests to the API server until crashed.
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
