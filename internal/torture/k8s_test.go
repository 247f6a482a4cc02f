package torture

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	_ "github.com/tenurehq/tenure/store/k8s"
)

// TestTortureK8s runs library electors on Leases of a real kube-apiserver,
// each candidate with its own client. Expiry is judged by each candidate
// from when it first saw a Lease version, so a candidate restarted after a
// kill waits up to a whole TTL more than one that was watching: failover
// is bounded by two TTLs plus the margins.
func TestTortureK8s(t *testing.T) {
	srv := testserver.Kube(t)
	kc := srv.Kubeconfig(t, srv.AdminToken)
	ttl := 2 * time.Second
	s := seed(t)
	d := &InProcess{
		StoreName: "k8s", N: 3, TTL: ttl, Seed: s,
		Open: func() (tenure.Store, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			return tenure.Open(ctx, "k8s://default/torture.?kubeconfig="+url.QueryEscape(kc))
		},
	}
	torture(t, d, Config{Seed: s, Duration: budget(t, 30*time.Second), TTL: ttl, Gap: 2 * ttl, FaultFor: 2 * ttl},
		ttl*3+time.Second)
}
