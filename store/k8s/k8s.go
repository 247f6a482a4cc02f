package k8s

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/storeurl"
	"github.com/tenurehq/tenure/internal/unchanged"
)

// Store is a lease store on Kubernetes coordination.k8s.io/v1 Leases.
// Create it with [Open]; it is safe for concurrent use by many goroutines,
// and every method blocks at most until the API server answered or its
// context is done.
type Store struct {
	leases    *leaseClient
	namespace string
	prefix    string
	where     string   // "NAMESPACE at HOST", for errors; never holds credentials
	secrets   []string // what errors must never quote
	closed    atomic.Bool
	bg        context.Context // cancelled by Close; ends watches
	stopBg    context.CancelFunc

	obs  unchanged.Tracker[version] // when this handle first saw each Lease version
	seen seen.Terms                 // the highest term this handle saw per key
	// last is the latest version of each Lease this handle wrote or
	// received (name -> *coordinationv1.Lease), so a renewal, a release,
	// or an acquisition after a watch event writes without reading first.
	// A stale entry costs one failed conditional write and a read.
	last sync.Map
}

var (
	_ tenure.Publisher = (*Store)(nil)
	_ tenure.Defaulter = (*Store)(nil)
)

func init() {
	storeurl.Register(open, "k8s")
}

// Open returns a store on the Leases of the namespace rawURL names,
// k8s://[NAMESPACE][/PREFIX][?kubeconfig=PATH&context=NAME] (see the
// package documentation). It reads the client configuration but does not
// contact the API server; the first call does. A malformed URL gives an
// error matching [tenure.ErrInvalid]; no error quotes a credential.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	return storeurl.Open(ctx, rawURL, "k8s", open)
}

func open(ctx context.Context, u *url.URL) (*Store, error) {
	t, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg, ns, err := t.restConfig()
	if err != nil {
		msg := scrubText(err.Error(), secretsOf(cfg))
		if t.kubeconfig != "" || t.context != "" {
			// The URL named a kubeconfig or context that does not
			// load: a bad URL, which no retry mends.
			return nil, fmt.Errorf("%w: k8s URL %q: %s", tenure.ErrInvalid, tenure.Redact(storeurl.String(u)), msg)
		}
		return nil, fmt.Errorf("k8s: %s", msg)
	}
	if !isLabel(ns) {
		return nil, fmt.Errorf("%w: k8s: namespace %q from the client configuration is not valid", tenure.ErrInvalid, ns)
	}
	return newStore(cfg, ns, t.prefix)
}

// NewForConfig returns a store on the Leases in namespace, named by
// prefix followed by the key (see the package documentation), through
// the API server cfg describes. cfg is copied; a zero QPS is raised to 50
// (burst 100), since client-go's default of 5 would delay renewals.
func NewForConfig(cfg *rest.Config, namespace, prefix string) (*Store, error) {
	if !isLabel(namespace) {
		return nil, fmt.Errorf("%w: k8s: namespace %q is not a valid Kubernetes namespace", tenure.ErrInvalid, namespace)
	}
	if prefix != "" && !validPrefix(prefix) {
		return nil, fmt.Errorf("%w: k8s: Lease name prefix %q is not valid", tenure.ErrInvalid, prefix)
	}
	return newStore(rest.CopyConfig(cfg), namespace, prefix)
}

func newStore(cfg *rest.Config, ns, prefix string) (*Store, error) {
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "tenure"
	}
	secrets := secretsOf(cfg)
	c, err := newLeaseClient(cfg, ns)
	if err != nil {
		return nil, fmt.Errorf("k8s: client for %s: %s", cfg.Host, scrubText(err.Error(), secrets))
	}
	bg, stop := context.WithCancel(context.Background())
	return &Store{
		leases:    c,
		namespace: ns,
		prefix:    prefix,
		where:     fmt.Sprintf("namespace %s at %s", ns, tenure.Redact(cfg.Host)),
		secrets:   secrets,
		bg:        bg,
		stopBg:    stop,
	}, nil
}

// Close ends the store's watches; later calls return [tenure.ErrClosed].
// Leases still held are not released: other candidates take them over
// once they have seen them unchanged for their lease duration. Close is
// idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stopBg()
	return nil
}

// Namespace returns the namespace whose Leases the store uses.
func (s *Store) Namespace() string { return s.namespace }

// LeaseName returns the name of the Lease that stands for key.
func (s *Store) LeaseName(key string) string { return leaseName(s.prefix, key) }

// Defaults implements [tenure.Defaulter]: in a pod, the identity to
// campaign as is the pod's name, from the environment variable POD_NAME
// (set it with the downward API, as the README shows). No TTL preference.
func (s *Store) Defaults() (string, time.Duration) { return os.Getenv("POD_NAME"), 0 }

// usable returns ctx's error or ErrClosed, so that no request starts when
// it could not finish.
func (s *Store) usable(ctx context.Context) error { return ctxerr.Usable(ctx, s.closed.Load()) }

// fail wraps a request error with the operation, the key and where the
// store is. After Close it is ErrClosed; when ctx is done, or past its
// deadline before its timer fired, the error matches ctx's error whatever
// the client returned (client-go's rate limiter then says only that its
// wait "would exceed context deadline"). Credentials are
// removed from the message.
func (s *Store) fail(ctx context.Context, op, key string, err error) error {
	if s.closed.Load() {
		return tenure.ErrClosed
	}
	msg := scrubText(err.Error(), s.secrets)
	if cerr := ctxerr.Err(ctx); cerr != nil {
		return fmt.Errorf("k8s: %s %q (Lease %s, %s): %w (%s)", op, key, s.LeaseName(key), s.where, cerr, msg)
	}
	if msg != err.Error() {
		return fmt.Errorf("k8s: %s %q (Lease %s, %s): %s", op, key, s.LeaseName(key), s.where, msg)
	}
	return fmt.Errorf("k8s: %s %q (Lease %s, %s): %w", op, key, s.LeaseName(key), s.where, err)
}

// secretsOf lists the credentials in cfg that errors must never quote.
func secretsOf(cfg *rest.Config) []string {
	if cfg == nil {
		return nil
	}
	var out []string
	for _, s := range []string{cfg.BearerToken, cfg.Password, string(cfg.KeyData)} {
		if len(s) >= 4 {
			out = append(out, s)
		}
	}
	return out
}

// scrubText replaces every secret in msg by "xxxxx".
func scrubText(msg string, secrets []string) string {
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

// errForeignKey reports a Lease that stands for another key.
var errForeignKey = errors.New("the Lease stands for another key")
