// Package storeurl checks the parts of a store URL that several stores
// spell the same way, with the same error messages: a server URL with a
// password (PostgreSQL, Redis), and a list of host:port with a path and no
// query (etcd, ZooKeeper). Errors wrap [tenure.ErrInvalid] and quote the
// URL only redacted; [Scrub] hides a URL's password in a driver's errors.
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

// Server parses rawURL as scheme://[user:password@]host..., where scheme
// is one of schemes; the first names the store in errors. It returns the
// URL and its password ("" without one).
func Server(rawURL string, schemes ...string) (u *url.URL, password string, err error) {
	name := schemes[0]
	u, err = url.Parse(rawURL)
	if err != nil || !slices.Contains(schemes, u.Scheme) {
		return nil, "", fmt.Errorf("%w: %q is not a %s:// URL", tenure.ErrInvalid, tenure.Redact(rawURL), name)
	}
	if u.Opaque != "" {
		// scheme:rest, not scheme://host: the driver would quietly use
		// localhost, and rest may well be a credential.
		return nil, "", fmt.Errorf("%w: the %s URL %q has no host part (want %s://HOST...)", tenure.ErrInvalid, name, tenure.Redact(rawURL), name)
	}
	if u.User != nil {
		password, _ = u.User.Password()
	}
	return u, password, nil
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
	red := tenure.Redact(u.String())
	if u.Scheme != scheme {
		return nil, "", fmt.Errorf("%w: %s URL %q must have the scheme %s", tenure.ErrInvalid, scheme, red, scheme)
	}
	if len(u.Query()) > 0 {
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

// Param removes the store's own query parameter name from q and returns
// its value; ok is false when q has none. The parameter must appear once
// with a value valid accepts, or the error, wrapping [tenure.ErrInvalid],
// quotes the values given, the URL as redacted, and want, what a valid
// value is ("want true or false").
func Param(q url.Values, name, redacted, want string, valid func(string) bool) (value string, ok bool, err error) {
	v, ok := q[name]
	if !ok {
		return "", false, nil
	}
	if len(v) != 1 || !valid(v[0]) {
		return "", false, fmt.Errorf("%w: %s=%q in %q: %s", tenure.ErrInvalid, name, strings.Join(v, ","), redacted, want)
	}
	q.Del(name)
	return v[0], true, nil
}
