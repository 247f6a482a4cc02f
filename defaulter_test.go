package tenure_test

import (
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// peerLike is a store bound to one identity with its own TTL, as a peer
// node is.
type peerLike struct{ *memory.Store }

func (peerLike) Defaults() (string, time.Duration) { return "7", 1500 * time.Millisecond }

func TestStoreDefaultsFillUnsetFields(t *testing.T) {
	st := peerLike{memory.New(nil)}
	c := tenure.Config{Store: st, Key: "k"}.WithDefaults()
	if c.Identity != "7" || c.TTL != 1500*time.Millisecond || c.RenewDeadline != time.Second {
		t.Fatalf("WithDefaults = identity %q TTL %s renew deadline %s; want the store's 7 and 1.5s (deadline 1s)", c.Identity, c.TTL, c.RenewDeadline)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c = tenure.Config{Store: st, Key: "k", Identity: "mine", TTL: 3 * time.Second}.WithDefaults()
	if c.Identity != "mine" || c.TTL != 3*time.Second {
		t.Fatalf("the store's defaults overrode the caller's fields: %q %s", c.Identity, c.TTL)
	}
}
