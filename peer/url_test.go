package peer_test

import "net/url"

func urlParse(s string) (*url.URL, error) { return url.Parse(s) }
