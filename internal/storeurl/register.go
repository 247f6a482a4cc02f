package storeurl

import (
	"context"
	"net/url"

	"github.com/tenurehq/tenure"
)

// Register registers open with [tenure.Register] for each of schemes, so
// that tenure.Open hands it the URL it parsed. When open fails, tenure.Open
// returns a nil Store, not a nil *Store inside a non-nil interface.
func Register[S tenure.Store](open func(context.Context, *url.URL) (S, error), schemes ...string) {
	opener := func(ctx context.Context, u *url.URL) (tenure.Store, error) {
		s, err := open(ctx, u)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	for _, scheme := range schemes {
		tenure.Register(scheme, opener)
	}
}

// RegisterString is [Register] for a store whose exported Open takes the
// URL as a string (its driver parses the string itself): tenure.Open hands
// open the URL it parsed, printed again with [String].
func RegisterString[S tenure.Store](open func(context.Context, string) (S, error), schemes ...string) {
	Register(func(ctx context.Context, u *url.URL) (S, error) {
		return open(ctx, String(u))
	}, schemes...)
}

// Open parses rawURL with [Parse], for the store called scheme, and hands
// the URL to open: the exported Open of a store whose opener, registered
// with [Register], takes a parsed URL.
func Open[S any](ctx context.Context, rawURL, scheme string, open func(context.Context, *url.URL) (S, error)) (S, error) {
	u, err := Parse(rawURL, scheme)
	if err != nil {
		var zero S
		return zero, err
	}
	return open(ctx, u)
}
