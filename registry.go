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
// ones; a malformed URL an error matching [ErrInvalid]. No error of Open
// contains a secret of rawURL: a string that does not parse as a URL is
// never quoted (the error says what is wrong with it), others only as
// [Redact] shows them, and any secret an opener's error quotes is replaced
// by "xxxxx".
func Open(ctx context.Context, rawURL string) (Store, error) {
	if err := checkContext(ctx, "Open"); err != nil {
		return nil, err
	}
	u, err := url.Parse(rawURL)
	switch {
	case (err != nil || u.Scheme == "") && looksLikeKeywords(rawURL):
		return nil, invalidf("store URL is a keyword=value list, not a URL: give SCHEME://..., such as postgres://USER@HOST/DB (registered schemes: %s)", strings.Join(Schemes(), ", "))
	case err != nil:
		return nil, invalidf("store URL cannot be parsed: %s", urlProblem(err))
	case u.Scheme == "":
		return nil, invalidf("store URL has no scheme: give SCHEME://... (registered schemes: %s)", strings.Join(Schemes(), ", "))
	}
	registryMu.RLock()
	open := registry[u.Scheme]
	registryMu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("%w %q in %q (registered: %s)", ErrUnknownScheme, u.Scheme, Redact(rawURL), strings.Join(Schemes(), ", "))
	}
	s, err := open(ctx, u)
	return s, RedactError(err, rawURL)
}

// looksLikeKeywords reports whether s is a keyword/value list such as a
// libpq connection string ("host=db user=app ...").
func looksLikeKeywords(s string) bool {
	name, _, ok := strings.Cut(strings.TrimSpace(s), "=")
	return ok && name != "" && plainName(strings.TrimSpace(name))
}
