// Package storeurl checks the parts of a store URL that several stores
// spell the same way, with the same error messages: a server URL with a
// password (PostgreSQL, Redis), and a list of host:port with a path and no
// query (etcd, ZooKeeper). Errors wrap [tenure.ErrInvalid] and quote the
// URL only redacted; [Scrub] hides a URL's password in a driver's errors,
// and [Fail] makes a failed call's error the same way in those stores.
// [Register] and [Open] are how a store's opener is reached by scheme and
// by its package's Open.
package storeurl

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/tenurehq/tenure"
)

// A ServerURL is a server URL that [Server] checked. The store takes its
// own query parameters out with [ServerURL.Param] and gives the driver
// what is left, [ServerURL.Driver].
type ServerURL struct {
	Password string // "" without one
	Redacted string // the URL, password hidden, for messages

	name  string // the store, in errors
	raw   string
	u     *url.URL
	query url.Values
	took  bool // Param removed a parameter from query
}

// Server parses rawURL as scheme://[user:password@]host..., where scheme
// is one of schemes; the first names the store in errors.
func Server(rawURL string, schemes ...string) (*ServerURL, error) {
	name := schemes[0]
	u, err := url.Parse(rawURL)
	if err != nil || !slices.Contains(schemes, u.Scheme) {
		return nil, fmt.Errorf("%w: %q is not a %s:// URL", tenure.ErrInvalid, tenure.Redact(rawURL), name)
	}
	if u.Opaque != "" {
		// scheme:rest, not scheme://host: the driver would quietly use
		// localhost, and rest may well be a credential.
		return nil, fmt.Errorf("%w: the %s URL %q has no host part (want %s://HOST...)", tenure.ErrInvalid, name, tenure.Redact(rawURL), name)
	}
	// url.URL.Query drops what it cannot parse ("tenure_table=a;b"), and
	// with it a parameter the operator gave: the store would quietly use
	// its default table or prefix, which another deployment may share.
	query, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: the %s URL %q has a query that cannot be parsed (a ';', or a bad %%-escape)", tenure.ErrInvalid, name, tenure.Redact(rawURL))
	}
	s := &ServerURL{Redacted: tenure.Redact(rawURL), name: name, raw: rawURL, u: u, query: query}
	if u.User != nil {
		s.Password, _ = u.User.Password()
	}
	return s, nil
}

// Has reports whether the URL's query, less what Param removed, has the
// parameter name.
func (s *ServerURL) Has(name string) bool { return s.query.Has(name) }

// Driver returns the URL to hand the driver: the one Server parsed, less
// the parameters Param removed (untouched if it removed none).
func (s *ServerURL) Driver() string {
	if s.took {
		s.u.RawQuery = s.query.Encode()
	}
	return String(s.u)
}

// Refused returns err, the driver's refusal of [ServerURL.Driver], as an
// error that wraps [tenure.ErrInvalid], names the store and quotes neither
// URL unredacted nor the password.
func (s *ServerURL) Refused(err error) error {
	err = tenure.RedactError(tenure.RedactError(err, s.raw), s.Driver())
	return Scrub(s.Password, fmt.Errorf("%w: %s URL %q: %w", tenure.ErrInvalid, s.name, s.Redacted, err))
}

// Parse parses rawURL for the store called scheme, which names it in the
// error.
func Parse(rawURL, scheme string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %s URL %q cannot be parsed", tenure.ErrInvalid, scheme, tenure.Redact(rawURL))
	}
	return u, nil
}

// Hosts checks that u is scheme://[user:password@]host:port[,host:port...]/path
// with no query, and returns its host:port list and its path, cleaned and
// rooted ("/" when it has none). what names one host:port in errors
// ("endpoint", "server").
func Hosts(u *url.URL, scheme, what string) (hosts []string, p string, err error) {
	red := tenure.Redact(String(u))
	if u.Scheme != scheme {
		return nil, "", fmt.Errorf("%w: %s URL %q must have the scheme %s", tenure.ErrInvalid, scheme, red, scheme)
	}
	if u.RawQuery != "" {
		return nil, "", fmt.Errorf("%w: %s URL %q: query parameters are not supported", tenure.ErrInvalid, scheme, red)
	}
	for _, hp := range strings.Split(u.Host, ",") {
		if _, port, err := net.SplitHostPort(hp); err != nil || port == "" {
			return nil, "", fmt.Errorf("%w: %s URL %q: %s %q is not host:port", tenure.ErrInvalid, scheme, red, what, hp)
		}
		hosts = append(hosts, hp)
	}
	return hosts, path.Clean("/" + u.Path), nil
}

// Param removes the store's own query parameter name from the URL and
// returns its value; ok is false when the URL has none. The parameter
// must appear once with a value valid accepts, or the error, wrapping
// [tenure.ErrInvalid], quotes the values given, the URL as redacted, and
// want, what a valid value is ("want true or false").
func (s *ServerURL) Param(name, want string, valid func(string) bool) (value string, ok bool, err error) {
	v, ok := s.query[name]
	if !ok {
		return "", false, nil
	}
	if len(v) != 1 || !valid(v[0]) {
		return "", false, fmt.Errorf("%w: %s=%q in %q: %s", tenure.ErrInvalid, name, strings.Join(v, ","), s.Redacted, want)
	}
	s.query.Del(name)
	s.took = true
	return v[0], true, nil
}

// String is u.String(), except that a URL with neither host nor path keeps
// its "scheme://": url.URL prints redis:// as "redis:" and redis://?db=1
// as "redis:?db=1", which messages then quote. Both forms mean the same to
// every driver.
func String(u *url.URL) string {
	s := u.String()
	if u.Scheme != "" && u.Opaque == "" && u.Host == "" && u.User == nil && u.Path == "" {
		return u.Scheme + "://" + strings.TrimPrefix(s, u.Scheme+":")
	}
	return s
}
