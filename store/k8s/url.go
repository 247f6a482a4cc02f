package k8s

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/storeurl"
)

// target is what a k8s:// URL names.
type target struct {
	namespace  string // "" for the kubeconfig context's or the pod's own
	prefix     string // prepended to every Lease name
	kubeconfig string // explicit kubeconfig file, or ""
	context    string // kubeconfig context, or ""
}

// parseURL reads k8s://[NAMESPACE][/PREFIX][?kubeconfig=PATH&context=NAME].
// Errors wrap tenure.ErrInvalid and quote the URL only through
// tenure.Redact.
func parseURL(u *url.URL) (target, error) {
	red := tenure.Redact(storeurl.String(u))
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: k8s URL %q: "+format, append([]any{tenure.ErrInvalid, red}, args...)...)
	}
	if u.Scheme != "k8s" {
		return target{}, bad("the scheme must be k8s")
	}
	if u.Opaque != "" {
		return target{}, bad("write k8s://NAMESPACE/PREFIX")
	}
	if u.User != nil {
		return target{}, bad("credentials do not belong in the URL; use a kubeconfig or the pod's service account")
	}
	if u.Port() != "" {
		return target{}, bad("the part after k8s:// is a namespace, not host:port")
	}
	var t target
	t.namespace = u.Hostname()
	if t.namespace != "" && !isLabel(t.namespace) {
		return target{}, bad("namespace %q is not a valid Kubernetes namespace (lower-case letters, digits and '-', at most 63)", t.namespace)
	}
	t.prefix = strings.TrimPrefix(u.Path, "/")
	if t.prefix != "" && !validPrefix(t.prefix) {
		return target{}, bad("Lease name prefix %q must be lower-case letters, digits, '-' and '.', start with a letter or digit, at most %d bytes", t.prefix, maxPrefix)
	}
	if u.Fragment != "" {
		return target{}, bad("fragments are not supported")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return target{}, bad("the query cannot be parsed")
	}
	for name, vals := range q {
		if len(vals) != 1 || vals[0] == "" {
			return target{}, bad("query parameter %q must be given once, with a value", name)
		}
		switch name {
		case "kubeconfig":
			t.kubeconfig = vals[0]
		case "context":
			t.context = vals[0]
		default:
			return target{}, bad("unknown query parameter %q (known: kubeconfig, context)", name)
		}
	}
	return t, nil
}

// errNoConfig is restConfig's error when no client configuration was
// found anywhere it looks.
var errNoConfig = errors.New("no client configuration: no kubeconfig in $KUBECONFIG or ~/.kube/config, and no pod's service account; add ?kubeconfig=PATH to the URL")

// inClusterNamespaceFile holds the namespace of a pod's service account.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// restConfig loads the client configuration t names: an explicit
// kubeconfig, else the pod's service account when running in a cluster
// (KUBERNETES_SERVICE_HOST set) and no context was asked for, else
// $KUBECONFIG or ~/.kube/config. It returns the namespace to use.
func (t target) restConfig() (*rest.Config, string, error) {
	if t.kubeconfig == "" && t.context == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, "", fmt.Errorf("in-cluster configuration: %w", err)
		}
		ns := t.namespace
		if ns == "" {
			ns = os.Getenv("POD_NAMESPACE")
		}
		if ns == "" {
			b, err := os.ReadFile(inClusterNamespaceFile)
			if err != nil {
				return nil, "", fmt.Errorf("no namespace in the URL and none from the service account: %w", err)
			}
			ns = strings.TrimSpace(string(b))
		}
		return cfg, ns, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if t.kubeconfig != "" {
		rules.ExplicitPath = t.kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: t.context})
	cfg, err := cc.ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own message says to set KUBERNETES_MASTER, which
		// this store does not read.
		return nil, "", errNoConfig
	}
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig: %w", err)
	}
	ns := t.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("kubeconfig namespace: %w", err)
		}
	}
	return cfg, ns, nil
}

// maxName is the longest Lease name (a DNS subdomain); maxPrefix leaves
// room for a key.
const (
	maxName   = 253
	maxPrefix = 200
)

// isLabel reports whether s is a DNS-1123 label, as namespaces are.
func isLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

// isSubdomain reports whether s is a DNS-1123 subdomain, as object names
// are: lower-case letters, digits, '-' and '.', starting and ending with a
// letter or digit, no '.' next to another '.' or a '-', at most 253 bytes.
func isSubdomain(s string) bool {
	if s == "" || len(s) > maxName || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case alnum(c), c == '-':
		case c == '.' && alnum(s[i-1]) && alnum(s[i+1]):
		default:
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// validPrefix reports whether p can start a Lease name: a subdomain
// followed by nothing, '-' or '.'.
func validPrefix(p string) bool {
	if len(p) > maxPrefix {
		return false
	}
	// Any name that starts with p and goes on with a letter or digit must
	// be a subdomain: p+"a" is the shortest.
	return isSubdomain(p + "a")
}
