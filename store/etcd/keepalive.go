package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keeper renews etcd leases over one long-lived LeaseKeepAlive stream per
// Store, one renewal at a time: a renewal is then a single message, where
// the client's KeepAliveOnce opens a new stream every time. It never
// renews by itself: each renewal is one call from the elector, so a leader
// that stops renewing lets its lease expire.
type keeper struct {
	mu     sync.Mutex // one renewal at a time on the stream
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc
}

// keepAlive restarts lease id's TTL once. It returns an error matching
// rpctypes.ErrLeaseNotFound if the lease no longer exists. If ctx ends
// first, the stream is dropped (its state is unknown) and the next call
// opens a new one.
func (s *Store) keepAlive(ctx context.Context, id clientv3.LeaseID) error {
	k := &s.ka
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stream == nil {
		sctx, cancel := context.WithCancel(s.bg)
		stream, err := pb.NewLeaseClient(s.c.ActiveConnection()).LeaseKeepAlive(sctx)
		if err != nil {
			cancel()
			return err
		}
		k.stream, k.cancel = stream, cancel
	}
	type result struct {
		resp *pb.LeaseKeepAliveResponse
		err  error
	}
	done := make(chan result, 1)
	stream := k.stream
	go func() {
		if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
			done <- result{err: err}
			return
		}
		resp, err := stream.Recv()
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		switch {
		case r.err != nil:
			k.reset()
			return r.err
		case r.resp.ID != int64(id):
			k.reset()
			return fmt.Errorf("keep-alive answered for lease %x, not %x", r.resp.ID, int64(id))
		case r.resp.TTL <= 0:
			return rpctypes.ErrLeaseNotFound
		}
		return nil
	case <-ctx.Done():
		k.reset()
		return ctx.Err()
	}
}

// reset drops the stream; the next keepAlive opens a new one.
func (k *keeper) reset() {
	if k.cancel != nil {
		k.cancel()
	}
	k.stream, k.cancel = nil, nil
}

// isLeaseNotFound reports whether err says the lease does not exist.
func isLeaseNotFound(err error) bool { return errors.Is(err, rpctypes.ErrLeaseNotFound) }
