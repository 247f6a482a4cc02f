package k8s

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// scheme knows coordination.k8s.io/v1 and the meta types only. client-go's
// typed clients register every API group at start-up (megabytes of
// allocations for every program that links this store); the store needs
// one resource.
var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	params = runtime.NewParameterCodec(scheme)
)

func init() {
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
}

// leaseClient is the part of the Lease API the store uses, in one
// namespace. Every call blocks until the API server answered or ctx is
// done; it is safe for concurrent use.
type leaseClient struct {
	rc *rest.RESTClient
	ns string
}

func newLeaseClient(cfg *rest.Config, ns string) (*leaseClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &coordinationv1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.NegotiatedSerializer = codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, err
	}
	return &leaseClient{rc: rc, ns: ns}, nil
}

func (c *leaseClient) Get(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rc.Get().Namespace(c.ns).Resource("leases").Name(name).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) Create(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rc.Post().Namespace(c.ns).Resource("leases").Body(l).Do(ctx).Into(out)
	return out, err
}

// Update writes l conditional on its resourceVersion (the API server
// answers 409 Conflict if the Lease changed since).
func (c *leaseClient) Update(ctx context.Context, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	err := c.rc.Put().Namespace(c.ns).Resource("leases").Name(l.Name).Body(l).Do(ctx).Into(out)
	return out, err
}

func (c *leaseClient) List(ctx context.Context, opts metav1.ListOptions) (*coordinationv1.LeaseList, error) {
	out := &coordinationv1.LeaseList{}
	err := c.rc.Get().Namespace(c.ns).Resource("leases").VersionedParams(&opts, params).Do(ctx).Into(out)
	return out, err
}

// Watch starts a watch; its stream lives until ctx is done or it is
// stopped.
func (c *leaseClient) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return c.rc.Get().Namespace(c.ns).Resource("leases").VersionedParams(&opts, params).Watch(ctx)
}
