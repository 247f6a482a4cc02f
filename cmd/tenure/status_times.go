package main

import (
	"net/url"
	"time"

	"github.com/tenurehq/tenure"
)

// grantTimes are the fields of tenure status --json that say when the
// current grant began, was last renewed, and how often the key changed
// hands. A store's [tenure.Record] carries the TTL and the time left, not
// these, so status fills in only what it can derive honestly and leaves the
// rest null:
//
//   - acquire_time: always null. No store reports when a grant began, and
//     the term does not say (a grant can last any number of renewals).
//     tenure watch and the --http view show when they saw each term begin.
//   - renew_time: when the store last extended the grant, derived as the
//     time of the read minus (ttl - remaining). It is exact to the read's
//     round trip on the stores whose time left is the server's own count
//     (local file, memory, Redis, PostgreSQL; etcd to the second, since its
//     lease TTLs are whole seconds). Null when the key is free, and on the
//     stores that report only an upper bound (ZooKeeper, Azure Blob,
//     Kubernetes, whose time left counts from when this process first saw
//     the Lease) and in peer modes, where it would be made up.
//   - transitions: always null. One read cannot know how often the key
//     changed hands; terms are not consecutive on every store. tenure watch
//     --http and its /metrics count the transitions they see.
type grantTimes struct {
	AcquireTime *string `json:"acquire_time"`
	RenewTime   *string `json:"renew_time"`
	Transitions *uint64 `json:"transitions"`
}

// remainingCounted are the store schemes whose [tenure.Record].Remaining
// is the store's own count of the grant's time left, so that the last
// renewal can be derived from it.
var remainingCounted = map[string]bool{
	"file": true, "memory": true, "redis": true, "rediss": true,
	"postgres": true, "postgresql": true, "etcd": true,
}

// deriveGrantTimes returns the grant times of r, read from the store at
// storeURL ("" for the default local store) and answered at readAt.
func deriveGrantTimes(storeURL string, r tenure.Record, readAt time.Time) grantTimes {
	var g grantTimes
	if !r.Held() || r.TTL <= 0 || r.Remaining > r.TTL {
		return g
	}
	scheme := "file"
	if storeURL != "" {
		u, err := url.Parse(storeURL)
		if err != nil {
			return g
		}
		scheme = u.Scheme
	}
	if !remainingCounted[scheme] {
		return g
	}
	s := readAt.Add(-(r.TTL - r.Remaining)).Format(time.RFC3339Nano)
	g.RenewTime = &s
	return g
}
