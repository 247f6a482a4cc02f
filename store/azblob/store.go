package azblob

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
)

// Lease durations Azure accepts for a blob lease (besides infinite, which a
// lease store cannot use: nobody could take over from a dead holder).
const (
	MinTTL = 15 * time.Second
	MaxTTL = 60 * time.Second
)

// Defaults of [Options].
const (
	DefaultPollInterval = 200 * time.Millisecond
	DefaultMaxRetries   = 2
	DefaultTryTimeout   = 10 * time.Second
)

// Options configures [New]. ServiceURL and Container are required, and one
// way to authenticate: AccountName with AccountKey, SAS, or TokenCredential.
type Options struct {
	// ServiceURL is the blob service endpoint, such as
	// https://ACCOUNT.blob.core.windows.net/ or, for Azurite,
	// http://127.0.0.1:10000/devstoreaccount1. It must not carry a query:
	// put a SAS in SAS.
	ServiceURL string
	// Container holds one blob per key; it is created on first use if
	// missing. Azure's naming rules apply (3–63 lowercase letters, digits
	// and single hyphens).
	Container string
	// Prefix, if not empty, is prepended with a "/" to every blob name, so
	// several applications can share a container. At most 255 bytes.
	Prefix string

	// AccountName and AccountKey authenticate with the account's shared key.
	AccountName, AccountKey string
	// SAS is a shared access signature query string (without "?"); it must
	// allow reading, creating and writing blobs and their leases (and creating
	// the container unless it exists).
	SAS string
	// TokenCredential authenticates with Microsoft Entra ID (for example an
	// azidentity credential); the identity needs the "Storage Blob Data
	// Contributor" role. Not available through URLs.
	TokenCredential azcore.TokenCredential

	// PollInterval is how often a [Store.Watch] reads the blob. Default
	// [DefaultPollInterval].
	PollInterval time.Duration
	// MaxRetries is how many times the SDK retries a failed request within
	// the caller's context (negative: never). Default [DefaultMaxRetries].
	MaxRetries int
	// TryTimeout limits one try of a request. Default [DefaultTryTimeout].
	// The caller's context deadline bounds all tries together.
	TryTimeout time.Duration
}

// Store is a lease store on Azure Blob Storage blob leases. Create it with
// [New] or [Open]. All methods are safe for concurrent use; each blocks for
// a few HTTP requests to the blob service, bounded by its context.
type Store struct {
	prefix    string
	endpoint  string // redacted, for errors
	container *container.Client
	transport *http.Transport
	poll      time.Duration

	mu      sync.Mutex      // orders Close with the start of watches
	closed  atomic.Bool     // set under mu
	life    context.Context // cancelled by Close, ends watches
	cancel  context.CancelFunc
	watches sync.WaitGroup

	seen seen.Terms // the highest term this Store saw per key
}

var (
	_ tenure.Publisher = (*Store)(nil)
)

// New returns a store for o. It checks o but does not contact the service
// (ctx only cancels construction); the first request does, and creates the container if it is missing. Errors
// about o wrap [tenure.ErrInvalid] and never quote the key or the SAS.
func New(ctx context.Context, o Options) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkContainer(o.Container); err != nil {
		return nil, err
	}
	o.Prefix = strings.Trim(o.Prefix, "/")
	if err := checkPrefix(o.Prefix); err != nil {
		return nil, err
	}
	su, err := url.Parse(o.ServiceURL)
	if err != nil || (su.Scheme != "http" && su.Scheme != "https") || su.Host == "" {
		return nil, fmt.Errorf("%w: azblob: service URL %q is not an http(s) URL", tenure.ErrInvalid, tenure.Redact(o.ServiceURL))
	}
	if su.RawQuery != "" || su.User != nil {
		return nil, fmt.Errorf("%w: azblob: service URL %q must not carry a query or credentials (use Options.SAS)",
			tenure.ErrInvalid, tenure.Redact(o.ServiceURL))
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	if o.PollInterval < 0 {
		return nil, fmt.Errorf("%w: azblob: PollInterval %s is negative", tenure.ErrInvalid, o.PollInterval)
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	if o.TryTimeout <= 0 {
		o.TryTimeout = DefaultTryTimeout
	}

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 16
	copts := &container.ClientOptions{ClientOptions: azcore.ClientOptions{
		Transport: &http.Client{Transport: transport},
		Retry: policy.RetryOptions{
			MaxRetries:    int32(o.MaxRetries),
			TryTimeout:    o.TryTimeout,
			RetryDelay:    100 * time.Millisecond,
			MaxRetryDelay: time.Second,
		},
	}}
	containerURL := strings.TrimSuffix(su.String(), "/") + "/" + o.Container
	c, err := newClient(containerURL, o, copts)
	if err != nil {
		return nil, err
	}
	life, cancel := context.WithCancel(context.Background())
	return &Store{
		prefix:    o.Prefix,
		endpoint:  tenure.Redact(containerURL),
		container: c,
		transport: transport,
		poll:      o.PollInterval,
		life:      life,
		cancel:    cancel,
	}, nil
}

// newClient returns a client of the container at containerURL with o's
// credentials. Its errors wrap [tenure.ErrInvalid] and never quote the key
// or the SAS.
func newClient(containerURL string, o Options, copts *container.ClientOptions) (*container.Client, error) {
	var c *container.Client
	var err error
	switch {
	case o.TokenCredential != nil:
		c, err = container.NewClient(containerURL, o.TokenCredential, copts)
	case o.AccountKey != "":
		if o.AccountName == "" {
			return nil, fmt.Errorf("%w: azblob: AccountKey given without AccountName", tenure.ErrInvalid)
		}
		var cred *container.SharedKeyCredential
		cred, err = container.NewSharedKeyCredential(o.AccountName, o.AccountKey)
		if err != nil {
			// The SDK's message does not quote the key, but say it our way.
			return nil, fmt.Errorf("%w: azblob: the account key of %q is not valid base64", tenure.ErrInvalid, o.AccountName)
		}
		c, err = container.NewClientWithSharedKeyCredential(containerURL, cred, copts)
	case o.SAS != "":
		if _, perr := url.ParseQuery(o.SAS); perr != nil {
			return nil, fmt.Errorf("%w: azblob: the SAS is not a query string", tenure.ErrInvalid)
		}
		c, err = container.NewClientWithNoCredential(containerURL+"?"+o.SAS, copts)
	default:
		return nil, fmt.Errorf("%w: azblob: no credentials (set AccountName and AccountKey, SAS, or TokenCredential)", tenure.ErrInvalid)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: azblob: cannot create a client for %s: %s", tenure.ErrInvalid, tenure.Redact(containerURL), safeText(err))
	}
	return c, nil
}

// check returns ErrClosed after Close, else ctx's error (see ctxerr.Usable).
func (s *Store) check(ctx context.Context) error { return ctxerr.Usable(ctx, s.closed.Load()) }

// checkCall is check for a call on key, checked first: what a call on one
// key checks before it talks to the service.
func (s *Store) checkCall(ctx context.Context, key string) error {
	return ctxerr.Call(ctx, s.closed.Load(), key)
}

// checkTTL enforces Azure's lease durations.
func checkTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL || ttl%time.Second != 0 {
		return fmt.Errorf("%w: azblob: ttl %s is not an Azure blob lease duration (whole seconds from %s to %s); set the elector's TTL (tenure run --ttl) in that range",
			tenure.ErrInvalid, ttl, MinTTL, MaxTTL)
	}
	return nil
}

// Close ends the store's watches and closes idle connections. Leases still
// held are not released: they expire after their TTL. Calls after Close
// return [tenure.ErrClosed]. Close does not block beyond waiting for the
// watches' in-flight reads to be cancelled.
func (s *Store) Close() error {
	s.mu.Lock()
	already := s.closed.Swap(true)
	s.mu.Unlock()
	if already {
		return nil
	}
	s.cancel()
	s.watches.Wait()
	s.transport.CloseIdleConnections()
	return nil
}

// Defaults implements [tenure.Defaulter]: Azure's shortest lease, [MinTTL],
// so an elector or `tenure run` without an explicit TTL works unchanged.
func (s *Store) Defaults() (identity string, ttl time.Duration) { return "", MinTTL }

var _ tenure.Defaulter = (*Store)(nil)
