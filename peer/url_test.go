package peer_test

import (
	"errors"
	"net/url"
)

func urlParse(s string) (*url.URL, error) { return url.Parse(s) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }
