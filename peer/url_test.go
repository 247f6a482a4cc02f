package peer_test

import (
	"context"
	"errors"
	"net/url"

	"github.com/tenurehq/tenure/peer"
)

func urlParse(s string) (*url.URL, error) { return url.Parse(s) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// openNode opens the member cfg configures, as tenure.Open of its URL
// would, through the algorithm registry.
func openNode(cfg peer.Config) (*peer.Node, error) {
	s, err := peer.Open(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	return s.(*peer.Node), nil
}
