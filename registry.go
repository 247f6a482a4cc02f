package tenure

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Opener opens a store from a parsed URL. It may connect, bounded by ctx.
// Errors must not contain the URL's credentials: use [Redact] when
// quoting it.
type Opener func(ctx context.Context, u *url.URL) (Store, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Opener{}
)

// Register makes a store available to [Open] under a URL scheme. Store
// packages call it from init, so importing a store package (for its side
// effect, `import _ ".../store/etcd"`) is enough to use its URLs. It panics
// if the scheme is empty or already registered, as [database/sql.Register]
// does.
func Register(scheme string, open Opener) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if scheme == "" || open == nil {
		panic("tenure: Register with an empty scheme or nil opener")
	}
	if _, dup := registry[scheme]; dup {
		panic("tenure: Register called twice for scheme " + scheme)
	}
	registry[scheme] = open
}

// Schemes returns the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	var s []string
	for k := range registry {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// Open opens the store named by rawURL, such as "file:///var/lib/tenure" or
// "etcd://127.0.0.1:2379/tenure", through the opener registered for its
// scheme. It is the one way the CLI constructs stores. An unregistered
// scheme gives an error matching [ErrUnknownScheme] that lists the known
// ones; a malformed URL an error matching [ErrInvalid]. Neither quotes the
// URL's password.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalidf("store URL %q cannot be parsed", Redact(rawURL))
	}
	if u.Scheme == "" {
		return nil, invalidf("store URL %q has no scheme (want one of %s)", Redact(rawURL), strings.Join(Schemes(), ", "))
	}
	registryMu.RLock()
	open := registry[u.Scheme]
	registryMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("%w %q in %q (registered: %s)", ErrUnknownScheme, u.Scheme, Redact(rawURL), strings.Join(Schemes(), ", "))
	}
	return open(ctx, u)
}

// secretParams are query parameters whose values Redact hides.
var secretParams = []string{"password", "passwd", "secret", "token", "key", "accountkey", "sig", "sas", "connection_string", "connectionstring", "auth"}

// Redact returns rawURL with its password and the values of secret-looking
// query parameters replaced by "xxxxx", for logs and errors. A string that
// does not parse as a URL is replaced whole.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "<unparseable URL>"
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			lk := strings.ToLower(k)
			for _, s := range secretParams {
				if strings.Contains(lk, s) {
					q[k] = []string{"xxxxx"}
					break
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
