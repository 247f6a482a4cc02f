package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxwait"
)

// openProbed opens the store as openStore does, then reads key once, so
// that an unreadable or corrupt record, a wrong password or a missing
// database fails now rather than in the elector's retry loop; the store is
// closed if the read fails. A read that fails because the server could not
// be reached or was not ready (see mayPass) is tried again until ctx is
// done, its first failure logged to logger as a warning: a tenure started
// while its store restarts waits for it within ctx, as it does once
// running (and as it did already on etcd and ZooKeeper, whose clients
// reconnect by themselves within the read's deadline). ctx bounds it all.
func openProbed(ctx context.Context, src storeSource, key string, logger *slog.Logger) (tenure.Store, error) {
	store, err := openStore(ctx, src)
	if err != nil {
		return nil, err
	}
	for pause := probeFirstPause; ; pause = min(2*pause, probeMaxPause) {
		_, err = store.Get(ctx, key)
		if err == nil {
			return store, nil
		}
		if !mayPass(err) {
			break
		}
		if pause == probeFirstPause {
			attrs := []any{"key", key, "err", err}
			if deadline, ok := ctx.Deadline(); ok {
				attrs = append(attrs, "for_up_to", time.Until(deadline).Round(time.Millisecond).String())
			}
			logger.Warn("tenure: cannot reach the store yet; reading the key again until it answers", attrs...)
		}
		if !ctxwait.Sleep(ctx, pause) {
			break
		}
	}
	store.Close()
	return nil, fmt.Errorf("cannot read key %q: %w", key, err)
}

// The pauses between the first reads of a store that cannot be reached:
// from probeFirstPause, doubling, up to probeMaxPause.
const (
	probeFirstPause = 100 * time.Millisecond
	probeMaxPause   = time.Second
)

// mayPass reports whether err, a store's failed read, may pass by itself:
// the network failed (a refused, reset or timed-out connection, a name
// that does not resolve yet), or a PostgreSQL server said it is starting
// up or shutting down (SQLSTATE 57P03). A server that answered with a
// refusal (a wrong password, a missing database, a TLS alert) or a corrupt
// record does not pass by itself.
func mayPass(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) {
		// crypto/tls reports a TLS alert, sent or received, as an
		// OpError too: a certificate refused now is refused later.
		return op.Op != "remote error" && op.Op != "local error"
	}
	var pg interface{ SQLState() string }
	return errors.As(err, &pg) && pg.SQLState() == "57P03"
}
