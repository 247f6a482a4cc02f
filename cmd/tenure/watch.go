package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
)

const watchHelp = `Usage: tenure watch [flags] --key KEY

Prints the current leader of KEY, then one line each time the leader or term
changes, including "no leader" when a holder releases or its lease expires,
until interrupted (SIGINT or SIGTERM; exit code 0). Lines start with the
local time the change was seen. With --json each line is an object shaped as
in "tenure status --json" plus "time" (RFC 3339).

Flags:
`

// watchCmd is `tenure watch`.
func watchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, done := parseKeyCmd("watch", watchHelp, "print one JSON object per line", args, stdout, stderr)
	if done {
		return code
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	store, err := openStore(peer.WithLogger(openCtx, quietLogger(stderr)), o.store)
	if err == nil {
		if _, err = store.Get(openCtx, o.key); err != nil {
			store.Close()
			err = fmt.Errorf("cannot read key %q: %w", o.key, err)
		}
	}
	cancel()
	if err != nil {
		return fail(stderr, err)
	}
	defer store.Close()
	obs := &tenure.Observer{Store: store, Key: o.key, Logger: quietLogger(stderr)}
	enc := json.NewEncoder(stdout)
	for rec := range obs.Changes(ctx) {
		now := time.Now()
		if o.json {
			j := toJSON(rec)
			j.Time = now.Format(time.RFC3339Nano)
			_ = enc.Encode(j)
		} else {
			fmt.Fprintf(stdout, "%s %s\n", now.Format("15:04:05.000"), describe(rec))
		}
	}
	return exitOK
}
